"""``emu run --replay RESULT.json``: the recorded run rebuilt from its ``run`` record, read as data.

A results file may come from someone else, so its record is data, never a command line:

* ``argv`` is a list of strings, ``run`` first; each option is written in full and is one that says
  *what* is run (:data:`WHAT`, :data:`FLAGS`), its value a printable string that ``emu run``'s own
  parser then checks (refusing in one line here, never with a usage text);
* the options that say where the figures go (:data:`OUTPUTS`) and where sockets listen (``--bind``)
  are left out: a replay writes only where its user's own command line says (:data:`OWN` may go with
  ``--replay``);
* no file the record names is read: for ``--config FILE`` the record's settings that came from that
  file are the settings layer; a topology file is read only when the user names it (``--replay R
  --topo FILE``);
* its ``topology`` and ``seed`` fields agree with its argv;
* anything else -- an option it does not know, an abbreviation (``--js``), a non-string item, a
  control character -- is refused in one line naming it and the fix.
"""

from __future__ import annotations

import re
import shlex

from ..config import ConfigError

WHAT = ("--topo", "--test", "--seed", "--processes", "--partition", "--set", "--config", "--fault", "--realtime",
        "--algo", "--size", "--dtype", "--op", "--root", "--ranks", "--offload", "--branch", "--density",
        "--bucket", "--overlap", "--load", "--warmup", "--measure", "--drain", "--job", "--gpcnet", "--flows",
        "--senders", "--cdf", "--duration")
"""Options of ``emu run`` with a value that say what is run: a replay takes them from the record."""
FLAGS = ("--direct", "--wire", "--manager", "--to-self", "--no-isolated")
"""Options of ``emu run`` without a value that say what is run (or how, with the same figures)."""
OUTPUTS = ("--json", "--csv", "--indent", "--pcap", "--trace", "--trace-limit", "--trace-bin", "--format")
"""Options that say where the figures go: never taken from a record; the user's own may go with --replay."""
OWN = (*OUTPUTS, "--bind")
"""What a user may give with ``--replay`` (and ``--topo FILE`` when the record's topology is a file)."""
_VERBOSE = re.compile(r"-v+|--verbose")
_NO_RUN = "its run record has no emu run command line (argv); only the results of emu run can be replayed"


def _show(item: object) -> str:
    """A JSON item, short, for a one-line refusal."""
    if isinstance(item, (list, dict)):
        return "a list" if isinstance(item, list) else "an object"
    return "null" if item is None else f"{type(item).__name__} {item!r}"


def _unknown(where: str, token: str) -> str:
    """The refusal of a record's item that is no option a replay takes."""
    from .cli_parser import run_parser_refusing

    opt = token.partition("=")[0]
    if not opt.startswith("-") or opt == "-":
        return f"{where}: its command line holds {token!r} where an option belongs; write the file again with emu run ... --json FILE"
    known = {o for action in run_parser_refusing()._actions for o in action.option_strings}
    longer = sorted(o for o in known if o.startswith(opt) and o != opt) if len(opt) > 2 else []
    what = f"not an option of emu run (options are written in full: {' or '.join(longer)}?)" if longer \
        else ("an option a replay does not take from a record" if opt in known else "not an option of emu run")
    return (f"{where}: its command line holds {opt}, {what}; a replay takes only the options that say what is run "
            "(--topo, --test, --set, ...): write the file again with emu run ... --json FILE")


def recorded_options(run: dict, path: str) -> list[str]:
    """The record's argv as ``emu run`` options of what is run, each ``--opt=value`` or a flag (so no
    value can be read as an option); refused in one line when it holds anything else."""
    where = f"--replay {path}"
    argv = run.get("argv")
    if not isinstance(argv, list):
        raise ConfigError(f"{where}: {_NO_RUN}")
    for i, item in enumerate(argv):
        if not isinstance(item, str):
            raise ConfigError(f"{where}: item {i} of its command line (run.argv) is {_show(item)}, not a string; "
                              "only the --json file of an emu run can be replayed")
    head = 0
    while head < len(argv) and _VERBOSE.fullmatch(argv[head]):
        head += 1  # emu -v run ...: how much is logged, not what is run
    if argv[head:head + 1] != ["run"]:
        raise ConfigError(f"{where}: {_NO_RUN}")
    tokens, out, i = argv[head + 1:], [], 0
    while i < len(tokens):
        opt, eq, value = tokens[i].partition("=")
        i += 1
        if opt == "--manager" and not eq and i < len(tokens) and tokens[i] in ("on", "none"):
            eq, value, i = "=", tokens[i], i + 1  # --manager none: the bare network
        if opt == "--manager" and eq and value in ("on", "none"):
            out.append(f"{opt}={value}")
            continue
        if opt in FLAGS:
            if eq:
                raise ConfigError(f"{where}: its command line gives {opt} a value ({tokens[i - 1]!r}); {opt} takes none")
            out.append(opt)
            continue
        if opt not in WHAT and opt not in OWN:
            raise ConfigError(_unknown(where, tokens[i - 1]))
        if not eq:
            if i >= len(tokens) or tokens[i].startswith("--"):
                raise ConfigError(f"{where}: {opt} in its command line has no value")
            value, i = tokens[i], i + 1
        if opt in WHAT:  # an output option and --bind are left out with their value
            if not value.isprintable():
                raise ConfigError(f"{where}: its {opt} {value!r} holds a control character; give printable text")
            out.append(f"{opt}={value}")
    return out


def check_own(argv: list[str]) -> None:
    """Refuse an option on the user's own command line that a replay takes from the record."""
    tokens = argv[argv.index("run") + 1:] if "run" in argv else argv
    given = [t.partition("=")[0] for t in tokens if t.startswith("--")]
    extra = [o for o in given if o not in (*OWN, "--replay", "--topo")]
    if extra:
        raise ConfigError(f"--replay takes the command from its file; leave out {extra[0]} (only "
                          f"{', '.join(OWN)} may go with it, and --topo FILE when its topology is a file)")


def replay_args(run: dict, path: str, own):
    """The recorded run as ``emu run``'s parsed options (``argparse.Namespace``), with the outputs and
    ``--bind`` of the user's own command line ``own``; refused in one line when the record is not one
    a replay takes."""
    from .cli_parser import run_parser_refusing
    from .sweepargs import check_repeats

    opts = recorded_options(run, path)
    try:
        args = run_parser_refusing().parse_args(opts)
        check_repeats(args)
    except ConfigError as e:
        raise ConfigError(f"--replay {path}: its command line: {e}") from None
    _check_fields(run, args, path)
    args.recorded_config = _config_layer(run, path) if args.config else None
    _topology_file(args, own, path)
    for dest in ("json", "csv", "indent", "pcap", "trace", "trace_limit", "trace_bin", "bind"):
        setattr(args, dest, getattr(own, dest))
    opts = [f"--topo={args.topo}" if o.startswith("--topo=") else o for o in opts]
    args.argv = ["run", *opts, *_own_outputs(own.argv)]  # what was run: its record is replayed the same way
    return args


def _own_outputs(argv: list[str]) -> list[str]:
    """The user's own command line after ``run``, without ``--replay`` and ``--topo`` and their values."""
    tokens = argv[argv.index("run") + 1:] if "run" in argv else list(argv)
    out, skip = [], False
    for t in tokens:
        opt, eq, _ = t.partition("=")
        if skip or opt in ("--replay", "--topo"):
            skip = not skip and not eq
            continue
        out.append(t)
    return out


def _check_fields(run: dict, args, path: str) -> None:
    """The record's topology and seed fields say what its argv says (else the file was edited)."""
    from .sweepargs import split_topos

    topo = run.get("topology")
    recorded = [topo] if isinstance(topo, str) else topo
    parsed = split_topos(args.topo) if args.topo else []
    if not (isinstance(recorded, list) and all(isinstance(t, str) for t in recorded)
            and [t.strip() for t in recorded] == parsed):
        raise ConfigError(f"--replay {path}: its topology field and its command line's --topo disagree; "
                          "write the file again with emu run ... --json FILE")
    seed = run.get("seed")
    if type(seed) is not int or seed != args.seed:
        raise ConfigError(f"--replay {path}: its seed field ({_show(seed)}) and its command line's --seed "
                          f"({args.seed}) disagree; write the file again with emu run ... --json FILE")


def _config_layer(run: dict, path: str) -> dict:
    """The settings the recorded run took from its ``--config`` file, from the record (the file is not
    read): every field whose recorded source is that file; and, at their defaults, the fields a
    topology family or ``emu run`` sets that the record leaves at theirs (the file set them back, or a
    later layer did, which the replay applies again)."""
    from emu.topologies.registry import FAMILIES

    from ..config import SECTIONS, parse_settings
    from .runrecord import CLI_DEFAULTS

    where = f"--replay {path}: its settings from --config"
    entries = run.get("settings")
    entries = entries if isinstance(entries, list) else [entries]
    layer: dict[str, dict] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: the record's settings are {_show(entry)}, not an object of fields")
        for key, item in entry.items():
            source = item.get("from") if isinstance(item, dict) else None
            if not isinstance(source, str):
                raise ConfigError(f"{where}: the record's {key!r} is not {{value, default, from}}")
            if source != "--config" and not source.startswith("--config "):
                continue
            value = item.get("value")
            if type(value) not in (str, int, float, bool):
                raise ConfigError(f"{where}: {key} = {_show(value)} is not a setting's value")
            try:
                [(section, fields)] = parse_settings([f"{key}={str(value).lower() if type(value) is bool else value}"]).items()
            except ConfigError as e:
                raise ConfigError(f"{where}: {e}") from None
            [(name, value)] = fields.items()
            if layer.get(section, {}).get(name, value) != value:
                raise ConfigError(f"{where}: {key} has two values in the record; write the file again")
            layer.setdefault(section, {})[name] = value
    recorded = {key for entry in entries for key in entry}
    under = {f"{s}.{f}" for fam in FAMILIES.values() for s, fs in (fam.defaults or {}).items() for f in fs}
    for key in sorted((under | set(CLI_DEFAULTS)) - recorded):
        section, _, name = key.partition(".")
        layer.setdefault(section, {}).setdefault(name, getattr(SECTIONS[section](), name))
    return layer


def _topology_file(args, own, path: str) -> None:
    """A topology file named by the record is read only when the user names it on their own line."""
    from emu.topologies.files import is_file_spec

    from .sweepargs import split_topos

    files = [t for t in split_topos(args.topo) if is_file_spec(t)]
    if own.topo is not None:
        if not files:
            raise ConfigError(f"--replay {path} takes its topology ({args.topo}) from the record; leave out --topo "
                              "(it goes with --replay only when the record's topology is a file)")
        args.topo = own.topo
    elif files:
        raise ConfigError(f"--replay {path}: its topology is the file {files[0]!r}, and a replay reads no file a "
                          f"record names; name it yourself: emu run --replay {shlex.quote(path)} --topo "
                          f"{shlex.quote(args.topo)}")
