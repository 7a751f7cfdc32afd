"""The ``agentdiag`` command. Thin over the library: parse options, call it, render, one-line errors."""

from __future__ import annotations

import io
import sqlite3
import sys
from typing import Any

import click

from otel_agentdiag._internal.inputs import scrub
from otel_agentdiag.cli import demo as _demo
from otel_agentdiag.cli import doctor as _doctor
from otel_agentdiag.cli import export as _export
from otel_agentdiag.cli import health as _health
from otel_agentdiag.cli import ingest as _ingest
from otel_agentdiag.cli import policy as _policy
from otel_agentdiag.cli import push as _push
from otel_agentdiag.cli import traces as _traces
from otel_agentdiag.cli._common import EXIT_USAGE, CliError, CliIncomplete, printable
from otel_agentdiag.redaction.hash_keys import REFUSED
from otel_agentdiag.storage import StoreError
from otel_agentdiag.version import __version__

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
                message = scrub(message, _given_words(sys.argv[1:] if args is None else args), self._names())
            click.echo(f"agentdiag: error: {_one_line(message)}{_one_line(hint)}", err=True)
            sys.exit(exc.exit_code if isinstance(exc, CliIncomplete) else EXIT_USAGE)
        except REFUSED as exc:
            # A store or key file that is not ours, or a weak key: it names the path (or variable) and the reason.
            click.echo(f"agentdiag: error: {_one_line(str(exc))}", err=True)
            sys.exit(EXIT_USAGE)
        except (StoreError, sqlite3.DatabaseError) as exc:
            # A store that opened but fails on read (a damaged page, say) is still one line, not a traceback.
            click.echo(f"agentdiag: error: the trace store cannot be read: {_one_line(str(exc))}", err=True)
            sys.exit(EXIT_USAGE)
        except click.Abort:
            click.echo("agentdiag: aborted", err=True)
            sys.exit(1)
        except BrokenPipeError:
            # `agentdiag traces | head`: the reader left; say nothing more.
            sys.stderr.close()
            sys.exit(0)
        sys.exit(result if isinstance(result, int) else 0)

    def _names(self) -> set[str]:
        """Command and option names: words a message may repeat (they are ours, not the user's data)."""
        names: set[str] = set(self.commands)
        for command in (self, *self.commands.values()):
            for param in command.params:
                names.update(param.opts)
                names.update(param.secondary_opts)
        return names


def _given_words(args: Any) -> list[str]:
    """The words of the command line, and the value of each ``--option=value`` word."""
    words: list[str] = []
    for arg in args or ():
        text = str(arg)
        words.append(text)
        if text.startswith("-") and "=" in text:
            words.extend(text.split("=", 1))
    return words


def _one_line(text: str) -> str:
    """An error message as one readable line: a path or id given on the command line may hold line breaks,
    terminal escapes or undecodable bytes; each such character is shown escaped, as ``repr`` would."""
    return printable(text)


def _tolerant_stdout() -> None:
    """A file name that is not UTF-8 reaches us as lone surrogates (PEP 383); echoing it (``wrote ... to PATH``)
    must not end in a traceback where stdout is strict (a UTF-8 locale other than C): escape it as stderr does."""
    stream = sys.stdout
    if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
        stream.reconfigure(errors="backslashreplace")


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agentdiag")
def cli() -> None:
    """Read and demo otel-agentdiag traces (agent runs, iterations, LLM and tool calls); check redaction."""


cli.add_command(_demo.demo)
cli.add_command(_doctor.doctor)
cli.add_command(_traces.traces)
cli.add_command(_traces.show)
cli.add_command(_health.sessions)
cli.add_command(_health.receipt)
cli.add_command(_health.status)
cli.add_command(_health.prune)
cli.add_command(_health.clear)
cli.add_command(_export.export)
cli.add_command(_policy.policy)
cli.add_command(_ingest.ingest)
cli.add_command(_push.push)


def main() -> None:
    cli(prog_name="agentdiag")
