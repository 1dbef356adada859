"""The rank side of ``emu mpirun``: in each rank's process, ``from mpi4py import MPI`` is
``emu.rank.mpi``, an MPI whose every call is carried out by the rank's emulated host.

Only the standard library (and numpy, where buffers need it) is imported here: nothing of the
emulator's engines runs in a rank. ``python -m emu.rank PROGRAM.py [ARGS]`` is how ``emu mpirun``
starts a rank (``emu.rank.__main__``)."""
