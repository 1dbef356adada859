"""Error classes, codes and strings of the emulated ``mpi4py.MPI`` (MPI 4.0 §9.5): MPICH's strings for
its classes (generated once from the real mpi4py), and the classes, codes and strings a program adds."""

from __future__ import annotations

from .consts import CONSTANTS

STRINGS = {
    0: 'No MPI error',
    1: 'Invalid buffer pointer',
    2: 'Invalid count',
    3: 'Invalid datatype',
    4: 'Invalid tag',
    5: 'Invalid communicator',
    6: 'Invalid rank',
    7: 'Invalid root',
    8: 'Invalid group',
    9: 'Invalid MPI_Op',
    10: 'Invalid topology',
    11: 'Invalid dimension argument',
    12: 'Invalid argument',
    13: 'Unknown error.  Please file a bug report.',
    14: 'Message truncated',
    15: 'Other MPI error',
    16: 'Internal MPI error!',
    17: 'See the MPI_ERROR field in MPI_Status for the error code',
    18: 'Pending request (no error)',
    19: 'Invalid MPI_Request',
    20: 'Access denied to file',
    21: 'Invalid amode value in MPI_File_open ',
    22: 'Invalid file name',
    23: 'An error occurred in a user-defined data conversion function',
    24: 'The requested datarep name has already been specified to MPI_REGISTER_DATAREP',
    25: 'File exists',
    26: 'File in use by some process',
    27: 'Invalid MPI_File',
    28: 'Invalid MPI_Info',
    29: 'Invalid key for MPI_Info ',
    30: 'Invalid MPI_Info value ',
    31: 'MPI_Info key is not defined ',
    32: 'Other I/O error ',
    33: 'Invalid service name (see MPI_Publish_name)',
    34: 'Unable to allocate memory for MPI_Alloc_mem',
    35: 'Inconsistent arguments to collective routine ',
    36: 'Not enough space for file ',
    37: 'File does not exist',
    38: 'Invalid port',
    39: 'Quota exceeded for files',
    40: 'Read-only file or filesystem name',
    41: 'Attempt to lookup an unknown service name ',
    42: 'Error in spawn call',
    43: 'Unsupported datarep passed to MPI_File_set_view ',
    44: 'Unsupported file operation ',
    45: 'Invalid MPI_Win',
    46: 'Invalid base address',
    47: 'Invalid locktype argument',
    48: 'Invalid keyval',
    49: 'Conflicting accesses to window ',
    50: 'Wrong synchronization of RMA calls ',
    51: 'Invalid size argument in RMA call',
    52: 'Invalid displacement argument in RMA call ',
    53: 'Invalid assert argument',
    55: 'Target memory is not contained within the window',
    56: 'Memory cannot be attached',
    57: 'Memory cannot be shared',
    58: 'Incorrect window flavor',
    75: 'Invalid MPI_Session handle',
    76: 'Process was aborted',
    77: 'Value is too large to store',
}
ERR_LASTCODE, ERR_ARG = CONSTANTS["ERR_LASTCODE"], CONSTANTS["ERR_ARG"]
_FIRST_USER = ERR_LASTCODE + 1  # a program's classes and codes come after MPICH's (as MPICH numbers them)
_PREDEF_MAX = max(v for k, v in CONSTANTS.items() if k.startswith("ERR_") and k != "ERR_LASTCODE")
_classes: dict[int, str] = {}
_codes: dict[int, int] = {}
"""A program's codes: code -> its class."""
_next = [_FIRST_USER]


class Exception(RuntimeError):  # noqa: A001 -- mpi4py's name: MPI.Exception
    """``MPI.Exception``: an MPI call failed. It is its error code as mpi4py's is: ``int(e)``,
    ``e == code``, ordered and hashed as the code, ``str(e)`` the error string (or the text the
    emulated library gave)."""

    __module__ = "mpi4py.MPI"

    def __init__(self, code: int = CONSTANTS["ERR_OTHER"], text: str = ""):
        code = int(code)
        if code < 0:
            code = CONSTANTS["ERR_UNKNOWN"]
        self.error_code, self.text = code, text
        super().__init__(text or self.error_string)

    def Get_error_code(self) -> int:
        return self.error_code

    def Get_error_class(self) -> int:
        try:
            return Get_error_class(self.error_code)
        except Exception:  # noqa: BLE001 -- a code nobody added: its own class, as MPICH answers
            return self.error_code

    def Get_error_string(self) -> str:
        try:
            return Get_error_string(self.error_code)
        except Exception:  # noqa: BLE001
            return f"MPI error {self.error_code}"

    error_class = property(Get_error_class)
    error_string = property(Get_error_string)

    def __str__(self) -> str:
        return self.text or self.error_string

    def __repr__(self) -> str:
        return f"MPI.Exception({self.error_code})"

    def __int__(self) -> int:
        return self.error_code

    def __index__(self) -> int:
        return self.error_code

    def __bool__(self) -> bool:
        return self.error_code != 0

    def __hash__(self) -> int:
        return hash(self.error_code)

    def _cmp(self, other):
        if isinstance(other, Exception):
            return other.error_code
        if isinstance(other, int):
            return other
        return None

    def __eq__(self, other):
        o = self._cmp(other)
        return NotImplemented if o is None else self.error_code == o

    def __ne__(self, other):
        o = self._cmp(other)
        return NotImplemented if o is None else self.error_code != o

    def __lt__(self, other):
        o = self._cmp(other)
        return NotImplemented if o is None else self.error_code < o

    def __le__(self, other):
        o = self._cmp(other)
        return NotImplemented if o is None else self.error_code <= o

    def __gt__(self, other):
        o = self._cmp(other)
        return NotImplemented if o is None else self.error_code > o

    def __ge__(self, other):
        o = self._cmp(other)
        return NotImplemented if o is None else self.error_code >= o


def _exc(code: int, text: str):
    return Exception(code, text)


def last_used_code() -> int:
    return _next[0] - 1 if _next[0] > _FIRST_USER else ERR_LASTCODE


def Add_error_class() -> int:
    c = _next[0]
    _next[0] += 1
    _classes[c] = ""
    return c


def Add_error_code(errorclass: int) -> int:
    if errorclass not in _classes and errorclass not in STRINGS:
        raise _exc(ERR_ARG, f"MPI_ERR_ARG: invalid error class {errorclass}")
    c = _next[0]
    _next[0] += 1
    _codes[c] = errorclass
    return c


def Add_error_string(errorcode: int, string: str) -> None:
    if errorcode in STRINGS or (errorcode not in _classes and errorcode not in _codes):
        raise _exc(ERR_ARG, f"MPI_ERR_ARG: invalid error code {errorcode} (not one the program added)")
    if errorcode in _classes:
        _classes[errorcode] = str(string)
    else:
        _codes[errorcode] = (_codes[errorcode], str(string)) if not isinstance(_codes[errorcode], tuple) else (
            _codes[errorcode][0], str(string))


def Remove_error_class(errorclass: int) -> None:
    if errorclass not in _classes:
        raise _exc(ERR_ARG, f"MPI_ERR_ARG: invalid error class {errorclass}")
    if any((v[0] if isinstance(v, tuple) else v) == errorclass for v in _codes.values()) or _classes[errorclass]:
        raise _exc(ERR_ARG, f"MPI_ERR_ARG: error class {errorclass} still has codes or a string")
    del _classes[errorclass]


def Remove_error_code(errorcode: int) -> None:
    if errorcode not in _codes or isinstance(_codes[errorcode], tuple):
        raise _exc(ERR_ARG, f"MPI_ERR_ARG: invalid error code {errorcode} (not added, or it still has a string)")
    del _codes[errorcode]


def Remove_error_string(errorcode: int) -> None:
    if errorcode in _classes:
        _classes[errorcode] = ""
    elif errorcode in _codes and isinstance(_codes[errorcode], tuple):
        _codes[errorcode] = _codes[errorcode][0]
    else:
        raise _exc(ERR_ARG, f"MPI_ERR_ARG: invalid error code {errorcode}")


def Get_error_class(errorcode: int) -> int:
    if 0 <= errorcode <= _PREDEF_MAX or errorcode == ERR_LASTCODE:
        return errorcode
    if errorcode in _classes:
        return errorcode
    if errorcode in _codes:
        v = _codes[errorcode]
        return v[0] if isinstance(v, tuple) else v
    raise _exc(ERR_ARG, f"MPI_ERR_ARG: invalid error code {errorcode}")


def Get_error_string(errorcode: int) -> str:
    if errorcode in STRINGS:
        return STRINGS[errorcode]
    if errorcode in _classes:
        return _classes[errorcode]
    if errorcode in _codes:
        v = _codes[errorcode]
        return v[1] if isinstance(v, tuple) else ""
    if 0 <= errorcode <= _PREDEF_MAX or errorcode == ERR_LASTCODE:
        return "Unknown error class"
    raise _exc(ERR_ARG, f"MPI_ERR_ARG: invalid error code {errorcode}")


class Unsupported(NotImplementedError, AttributeError):
    """A part of MPI the emulated library does not have (also an AttributeError: ``hasattr`` is False)."""


def _unsupported(where: str, name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    raise Unsupported(f"the emulated MPI (emu mpirun) has no {where}{name}")


def call_user(fn, *args, what: str = "a callback", **kwargs):
    """A program's callback, as mpi4py calls one from MPI: an exception it raises is printed (its traceback
    on stderr) and the MPI call fails -- with the error class of an ``MPI.Exception``, else ERR_OTHER."""
    try:
        return fn(*args, **kwargs)
    except BaseException as e:  # noqa: BLE001 -- the program's error, reported as MPI reports it
        import traceback

        traceback.print_exc()
        code = e.Get_error_class() if isinstance(e, Exception) else CONSTANTS["ERR_OTHER"]
        raise _exc(code, f"{Get_error_string(code)}: {what} raised (traceback above)") from None
