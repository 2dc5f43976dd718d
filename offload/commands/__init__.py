"""One module per `xdp2tc` subcommand, each with `add_parser(sub)` (its options) and
`run(args)` (exit code); offload/cli.py puts them together.

COMMANDS lists them without importing them: the CLI imports only the module of the command
it runs (each pulls in its part of the pipeline), and `xdp2tc --help` needs only the one-line
help of each."""

#: name -> (module with `add_parser(sub)` and `run(args)`, one-line help), in `--help` order.
COMMANDS: dict[str, tuple[str, str]] = {
    "info": ("offload.commands.info", "programs, maps, globals and source files of an object"),
    "disasm": ("offload.commands.disasm", "disassembly in llvm-objdump -dr layout"),
    "cfg": ("offload.commands.cfg", "control-flow graph of a program"),
    "analyze": ("offload.commands.analyze", "explore every path: verdicts, effects, decision classes"),
    "verify": ("offload.commands.verify", "check every path's prediction against the running kernel"),
    "rules": ("offload.commands.rules", "tc flower rules for the paths hardware can take, each proven"),
    "sync": ("offload.commands.sync", "keep tc filters in step with a running program's maps (a daemon)"),
    "cost": ("offload.commands.cost", "per-path cost in ns, tail-call share and savings, tail-call graph"),
    "calibrate": ("offload.commands.calibrate", "measure the cost model's prices on this kernel"),
    "check": (
        "offload.check",
        "CI gate: every path offloaded, passed or explained; per target; text, JSON or SARIF",
    ),
    "lsp": ("offload.commands.lsp", "the language server for editors (stdio; offload/lsp.py)"),
}


def command_help(name: str) -> str:
    """The one-line help of command `name` (its module's `add_parser` passes it on)."""
    return COMMANDS[name][1]
