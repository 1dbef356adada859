"""In-network aggregation (spec 04): the processing-unit model, its analytic model, the aggregation
engine of a switch."""

from .model import Model, model, service_time
from .pu import ALGOS, ProcessingUnit

__all__ = ["ALGOS", "Model", "ProcessingUnit", "model", "service_time"]
