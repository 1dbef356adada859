"""The MPI job key (``~/.config/emu/mpi.key``, ``EMU_KEY_FILE``) is refused as ssh refuses a private
key -- not a regular file, a symbolic link, not the user's, readable by others -- on one line that
says what to fix, never with a traceback and never hanging; it is made atomically under an
unpredictable name, never through a planted file or link."""

import os
import stat
import subprocess
import sys
import threading

import pytest

from emu.config import ConfigError
from emu.mpi import load_key

from test_mpi import EMU, MPIEXEC, _run, needs_mpi


@pytest.fixture
def path(tmp_path, monkeypatch):
    p = tmp_path / "k" / "mpi.key"
    monkeypatch.setenv("EMU_KEY_FILE", str(p))
    return p


def _private(p, data=bytes(range(32))):
    p.parent.mkdir(mode=0o700, exist_ok=True)
    p.write_bytes(data)
    os.chmod(p, 0o600)


def test_a_private_key_file_of_this_user_is_read(path):
    _private(path)
    assert load_key(create=False, wait_s=0) == bytes(range(32))


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o602, 0o610])
def test_refused_when_group_or_others_have_any_access(path, mode):
    _private(path)
    os.chmod(path, mode)
    with pytest.raises(ConfigError, match=f"may be read by others \\(mode 0{mode:o}\\); chmod 600 "):
        load_key(create=False, wait_s=0)
    with pytest.raises(ConfigError, match="chmod 600"):
        load_key(create=True, wait_s=0)  # an existing key is never replaced, just refused


def test_refused_when_a_symbolic_link_even_to_a_private_key(path, tmp_path):
    real = tmp_path / "real.key"
    _private(real)
    path.parent.mkdir()
    path.symlink_to(real)
    for create in (False, True):
        with pytest.raises(ConfigError, match="is a symbolic link"):
            load_key(create=create, wait_s=0)
    path.unlink()
    path.symlink_to(tmp_path / "nowhere")  # dangling: not followed to make a file there either
    with pytest.raises(ConfigError, match="is a symbolic link"):
        load_key(create=True, wait_s=0)
    assert not (tmp_path / "nowhere").exists()


def test_refused_when_a_folder(path):
    path.mkdir(parents=True, mode=0o700)
    for create in (False, True):
        with pytest.raises(ConfigError, match=r"is not a regular file \(a directory\)"):
            load_key(create=create, wait_s=0)


def test_refused_when_a_fifo_without_hanging(path):
    path.parent.mkdir(mode=0o700)
    os.mkfifo(path, 0o600)
    got = []

    def load():
        try:
            load_key(create=False, wait_s=0)
        except ConfigError as e:
            got.append(e)
    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():  # let the stuck open() go before failing
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        pytest.fail("load_key hangs on a FIFO")
    assert got and "is not a regular file (a FIFO" in str(got[0])


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_refused_when_owned_by_another_user(path):
    _private(path)
    os.chown(path, 4242, -1)
    with pytest.raises(ConfigError, match=r"is owned by uid 4242, not by you \(uid 0\); chown 0 "):
        load_key(create=False, wait_s=0)


def test_refused_when_the_wrong_size(path):
    _private(path, b"short")
    with pytest.raises(ConfigError, match="must hold 32 bytes, it holds 5"):
        load_key(create=False, wait_s=0)


def test_made_under_an_unpredictable_name_whatever_is_planted(path, tmp_path):
    path.parent.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    planted = [path.parent / f"{path.name}.{os.getpid()}.tmp", path.parent / f".{path.name}.{os.getpid()}.tmp"]
    planted[0].write_bytes(b"planted")
    planted[1].symlink_to(victim)
    key = load_key(create=True, wait_s=0)
    assert len(key) == 32 and load_key(create=False, wait_s=0) == key
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_nlink == 1
    assert victim.read_bytes() == b"untouched" and planted[0].read_bytes() == b"planted"
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name] + [p.name for p in planted])
    assert load_key(create=True, wait_s=0) == key  # made once, then kept


def test_two_makers_at_once_agree_on_one_key(path):
    keys = []
    ts = [threading.Thread(target=lambda: keys.append(load_key(create=True, wait_s=5))) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(keys) == 8 and len(set(keys)) == 1
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_the_command_refuses_a_bad_key_file_on_one_line(tmp_path):
    """Outside mpiexec no key is needed: the command does not look at it. Under it (below) rank 0
    refuses; here the one-line path of the CLI is checked through the library call."""
    code = ("import sys\nfrom emu.front.cli import report\nfrom emu.mpi import load_key\n"
            "try:\n    load_key(create=True, wait_s=0)\nexcept Exception as e:\n    sys.exit(report(e))\n")
    key = tmp_path / "key" / "mpi.key"
    key.mkdir(parents=True)
    p = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, EMU_KEY_FILE=str(key)),
                       capture_output=True, text=True, timeout=60)
    out = " ".join(p.stdout.split())  # (the console wraps long lines at 120 columns)
    assert p.returncode == 2, p.stdout + p.stderr
    assert out.startswith("refused: the MPI key file") and "is not a regular file (a directory)" in out
    assert "Traceback" not in p.stdout + p.stderr


@needs_mpi
def test_mpiexec_refuses_a_key_folder_or_fifo_on_one_line_and_every_rank_ends(tmp_path):
    key = tmp_path / "key" / "mpi.key"
    key.mkdir(parents=True)
    p = _run([MPIEXEC, "-n", "2"] + EMU + ["run", "--topo", "star:n=2", "--test", "pingall"], tmp_path, timeout=60)
    assert p.returncode != 0 and "is not a regular file (a directory)" in " ".join(p.stdout.split()), p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    key.rmdir()
    os.mkfifo(key, 0o600)
    p = _run([MPIEXEC, "-n", "2"] + EMU + ["run", "--topo", "star:n=2", "--test", "pingall"], tmp_path, timeout=60)
    assert p.returncode != 0 and "is not a regular file (a FIFO" in " ".join(p.stdout.split()), p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
