"""``MPI.Exception`` and the error classes of the emulated ``mpi4py.MPI`` (MPICH's numbers)."""

from __future__ import annotations

ERR_BUFFER, ERR_COUNT, ERR_TYPE, ERR_OP, ERR_ARG, ERR_TRUNCATE, ERR_OTHER = 1, 2, 3, 9, 12, 14, 15


class Exception(RuntimeError):  # noqa: A001 -- mpi4py's name: MPI.Exception
    """``MPI.Exception``: an MPI call failed; ``Get_error_class()`` says how."""

    def __init__(self, code: int = 15, text: str = ""):
        super().__init__(text or f"MPI error {code}")
        self.error_code, self.text = code, text

    def Get_error_code(self) -> int:
        return self.error_code

    Get_error_class = Get_error_code

    def Get_error_string(self) -> str:
        return self.text


class Missing(NotImplementedError, AttributeError):
    """A part of MPI the emulated library does not have (also an AttributeError: ``hasattr`` is False)."""
