"""The ``agentdiag`` command. Thin over the library: parse options, call it, render, one-line errors.

Each command's module is imported when that command runs (``agentdiag show`` loads the reading and rendering it
needs, not the SDK, the exporters or the pipeline); ``agentdiag --help`` lists every command from its one-line
help, known here (:data:`COMMANDS`), without importing any of them.
"""

from __future__ import annotations

import importlib
import io
import re
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any

import click

from otel_agentdiag._internal.inputs import scrub
from otel_agentdiag.cli._common import EXIT_USAGE, CliError, CliIncomplete, printable
from otel_agentdiag.version import __version__

COMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "otel_agentdiag.cli.demo",
        "Run a scripted demo agent (fake model, real tools, one recovered tool error) and print its trace.",
    ),
    "doctor": ("otel_agentdiag.cli.doctor", "Show the resolved configuration and prove redaction with a canary."),
    "traces": ("otel_agentdiag.cli.traces", "List traces, newest first."),
    "show": (
        "otel_agentdiag.cli.traces",
        "Show one trace as a tree: TRACE_ID is the full id or a unique prefix of it (4 hex digits or more).",
    ),
    "sessions": ("otel_agentdiag.cli.health", "List sessions, newest activity first, with their receipt status."),
    "receipt": ("otel_agentdiag.cli.health", "Print the integrity receipt of a session, or of the whole store."),
    "status": (
        "otel_agentdiag.cli.health",
        "Project a session's run health: stage, counts, stall, repetition, recovery, signals.",
    ),
    "prune": (
        "otel_agentdiag.cli.health",
        "Apply the retention limits now (the defaults unless given) and print what was pruned.",
    ),
    "clear": (
        "otel_agentdiag.cli.health",
        "Delete a session's spans and captured content; spans of it still in flight are dropped when they arrive"
        " (counted).",
    ),
    "export": (
        "otel_agentdiag.cli.export",
        "Export sessions under the strict policy: a support bundle, OTLP-JSON or Jaeger-JSON.",
    ),
    "policy": (
        "otel_agentdiag.cli.policy",
        "Print a redaction policy as a policy file (JSON), or as the Collector's redaction processor (YAML).",
    ),
    "ingest": (
        "otel_agentdiag.cli.ingest",
        "Ingest an OTLP-JSON FILE (one request per line, or one document) into the store, as imported spans.",
    ),
    "push": (
        "otel_agentdiag.cli.push",
        "Push stored spans to an OTLP endpoint (a Collector), strict policy, each span once per endpoint.",
    ),
    "serve": (
        "otel_agentdiag.cli.serve",
        "Serve the store over HTTP: a web viewer and the Jaeger query API (v1 and v3), read-only.",
    ),
}
"""Each command: the module that defines it (under the command's own name) and the first paragraph of its help,
which ``agentdiag --help`` shortens as click does (a test keeps it equal to the command's docstring)."""

_NoArgsIsHelp: type[click.UsageError] = getattr(
    click.exceptions, "NoArgsIsHelpError", type("_Never", (click.UsageError,), {})
)


class _Group(click.Group):
    """Every error is one line on stderr (``agentdiag: error: ...``) and exit code 2 (1 for a command that did
    part of its work: :class:`~otel_agentdiag.cli._common.CliIncomplete`)."""

    def main(
        self,
        args: Any = None,
        prog_name: Any = None,
        complete_var: Any = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        _tolerant_stdout()
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _NoArgsIsHelp as exc:
            # Bare `agentdiag`: the help on stdout, and still one error line (click >= 8.2 made it a usage error).
            click.echo(exc.ctx.get_help() if exc.ctx is not None else "")
            click.echo("agentdiag: error: no command given (see 'agentdiag --help')", err=True)
            sys.exit(EXIT_USAGE)
        except click.ClickException as exc:
            hint = ""
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                hint = f" (see '{exc.ctx.command_path} --help')"
            message = exc.format_message()
            if not isinstance(exc, CliError):
                # click's own messages quote what was typed (a bad value, an unknown option, an extra argument):
                # each word given is described instead, as our own messages do (describe_input).
                given = [str(a) for a in (sys.argv[1:] if args is None else args) or ()]
                message = scrub(message, _given_words(given), self._names() | self._safe_words(given))
            click.echo(f"agentdiag: error: {printable(message)}{printable(hint)}", err=True)
            sys.exit(exc.exit_code if isinstance(exc, CliIncomplete) else EXIT_USAGE)
        except click.Abort:
            click.echo("agentdiag: aborted", err=True)
            sys.exit(1)
        except BrokenPipeError:
            # `agentdiag traces | head`: the reader left; say nothing more.
            sys.stderr.close()
            sys.exit(0)
        except Exception as exc:
            # Imported here, on the error path: the key and store modules are not loaded for `--version`.
            import sqlite3

            from otel_agentdiag.redaction.hash_keys import REFUSED
            from otel_agentdiag.storage import StoreError

            if isinstance(exc, REFUSED):
                # A store or key file that is not ours, or a weak key: it names the path (or variable) and the
                # reason.
                click.echo(f"agentdiag: error: {printable(exc)}", err=True)
                sys.exit(EXIT_USAGE)
            if isinstance(exc, UnicodeDecodeError):
                # The sqlite3 module's, for an error message that is not UTF-8 (a damaged store's schema), or a
                # file that is not UTF-8: one line, never the text.
                click.echo(
                    f"agentdiag: error: text that is not UTF-8 ({exc.reason} at byte {exc.start}): a damaged"
                    " store or input file",
                    err=True,
                )
                sys.exit(EXIT_USAGE)
            if isinstance(exc, (StoreError, sqlite3.DatabaseError)):
                # A store that opened but fails on read (a damaged page, say) is still one line, not a traceback.
                click.echo(f"agentdiag: error: the trace store cannot be read: {printable(exc)}", err=True)
                sys.exit(EXIT_USAGE)
            raise
        sys.exit(result if isinstance(result, int) else 0)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, as click writes it, from :data:`COMMANDS` for the commands not yet
        imported (a bare command carrying the same help shortens to the same line)."""
        commands = self.commands
        if not isinstance(commands, _LazyCommands):
            super().format_commands(ctx, formatter)
            return
        rows: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            command = commands.peek(name)
            if not command.hidden:
                rows.append((name, command))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in rows])

    def _safe_words(self, args: list[str]) -> set[str]:
        """The words of ``args`` an error may repeat: see :func:`_safe_to_echo` and :func:`_path_words`."""
        words = {w for w in args for w in (w, *w.split("=", 1)[1:]) if _safe_to_echo(w)}
        at = next((i for i, w in enumerate(args) if not w.startswith("-")), None)
        if at is None or args[at] not in self.commands:
            return words
        return words | _path_words(self.commands[args[at]], args[at + 1 :])

    def _names(self) -> set[str]:
        """Command and option names: words a message may repeat (they are ours, not the user's data)."""
        names: set[str] = set(self.commands)
        for command in (self, *self.commands.values()):
            for param in command.params:
                names.update(param.opts)
                names.update(param.secondary_opts)
        return names


_OPTION_WORD = re.compile(r"--?[a-z]+(?:-[a-z]+)*")
_NUMBER_WORD = re.compile(r"[+-]?[0-9]{1,10}(?:\.[0-9]{1,10})?")
_PLAIN_WORD = re.compile(r"[a-z]+(?:[-_][a-z]+)*")
_MAX_ECHOED = 40


def _safe_to_echo(word: str) -> bool:
    """Whether a word typed on the command line may be repeated in an error: an option or command name (lowercase
    words and hyphens), a number of at most 10 digits, or a lowercase word (a mistyped format or choice), short,
    passing the public-safety check. Everything else (an id, a session, a time, a URL, a value with capitals or
    digits in it: what a credential or an identifier looks like) is described by its shape instead."""
    if len(word) > _MAX_ECHOED:
        return False
    if not (_OPTION_WORD.fullmatch(word) or _NUMBER_WORD.fullmatch(word) or _PLAIN_WORD.fullmatch(word)):
        return False
    from otel_agentdiag.redaction.recognizers import is_sensitive  # on the error path only

    return not is_sensitive(word)


def _path_words(command: click.Command | None, args: list[str]) -> set[str]:
    """The values given to ``command``'s path-typed options and arguments (the user's own files, named so that
    an error about one says which)."""
    if command is None:
        return set()
    takes_value = {}
    for param in command.params:
        if isinstance(param, click.Option) and not param.is_flag and not param.count:
            for opt in param.opts:
                takes_value[opt] = isinstance(param.type, click.Path)
    path_arguments = [isinstance(p.type, click.Path) for p in command.params if isinstance(p, click.Argument)]
    found: set[str] = set()
    position, i = 0, 0
    while i < len(args):
        word = args[i]
        if word.startswith("-") and word != "-":
            name, equals, value = word.partition("=")
            if name in takes_value:
                if equals:
                    if takes_value[name]:
                        found.add(value)
                elif i + 1 < len(args):
                    if takes_value[name]:
                        found.add(args[i + 1])
                    i += 1
        else:
            if position < len(path_arguments) and path_arguments[position]:
                found.add(word)
            position += 1
        i += 1
    return found


def _given_words(args: Any) -> list[str]:
    """The words of the command line, and the value of each ``--option=value`` word."""
    words: list[str] = []
    for arg in args or ():
        text = str(arg)
        words.append(text)
        if text.startswith("-") and "=" in text:
            words.extend(text.split("=", 1))
    return words


def _tolerant_stdout() -> None:
    """A file name that is not UTF-8 reaches us as lone surrogates (PEP 383); echoing it (``wrote ... to PATH``)
    must not end in a traceback where stdout is strict (a UTF-8 locale other than C): escape it as stderr does."""
    stream = sys.stdout
    if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
        stream.reconfigure(errors="backslashreplace")


class _LazyCommands(MutableMapping[str, click.Command]):
    """The group's commands by name, each imported from its module on first look-up (:data:`COMMANDS`); a
    mapping as click's own, so ``cli.commands[name]``, ``in``, iteration and ``add_command`` work as before."""

    def __init__(self, table: dict[str, tuple[str, str]]) -> None:
        self._table = table
        self._names: list[str] = list(table)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        command = self._loaded.get(name)
        if command is None:
            if name not in self._table:
                raise KeyError(name)
            command = getattr(importlib.import_module(self._table[name][0]), name)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self._table[name][0]}.{name} is not a click command")
            self._loaded[name] = command
        return command

    def peek(self, name: str) -> click.Command:
        """The command if it is loaded, else a bare command with its help (what ``--help`` lists)."""
        if name in self._loaded or name not in self._table:
            return self[name]
        return click.Command(name, help=self._table[name][1])

    def __setitem__(self, name: str, command: click.Command) -> None:
        if name not in self._names:
            self._names.append(name)
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self._names:
            raise KeyError(name)
        self._names.remove(name)
        self._loaded.pop(name, None)
        self._table = {key: value for key, value in self._table.items() if key != name}

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)


@click.group(cls=_Group, commands=_LazyCommands(COMMANDS), context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agentdiag")
def cli() -> None:
    """Read and demo otel-agentdiag traces (agent runs, iterations, LLM and tool calls); check redaction."""


def main() -> None:
    cli(prog_name="agentdiag")
