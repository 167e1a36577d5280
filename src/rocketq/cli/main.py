"""The ``rocketq`` command line: one click group, one module per command family.

* ``rocketq run``     - :mod:`rocketq.cli.run_cmd`, the demo job on an embedded store
* ``rocketq store``   - :mod:`rocketq.cli.store_cmd`, offline verify / dump / rebuild / repair
* ``rocketq bench``   - :mod:`rocketq.cli.bench_cmd`, the benchmarks kept in the repository
* ``rocketq serve``   - :mod:`rocketq.cli.serve_cmd`, NameServer + broker (+ gRPC) in one process
* ``rocketq broker``  - :mod:`rocketq.cli.serve_cmd`, a broker alone
* ``rocketq namesrv`` - :mod:`rocketq.namesrv.cli`, a NameServer alone
* ``rocketq send|consume`` - :mod:`rocketq.cli.messaging`; ``topic|group|cluster|message`` -
  :mod:`rocketq.cli.admin_cmds`

Errors are one line on stderr and exit code 1 (``-v`` shows the traceback); Ctrl-C outside a
command that handles it exits with 130.
"""

from __future__ import annotations

import gc
import sys

import click

from rocketq import __version__

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


class _OneLineErrors(click.Group):
    """Every error is one clear line on stderr and a non-zero exit code (tracebacks only with -v)."""

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            click.echo(f"rocketq: error: {_one_line(exc.format_message())}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"rocketq: error: {_one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("rocketq: aborted; nothing was changed", err=True)
            sys.exit(EXIT_ERROR)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except BrokenPipeError:        # output piped into `head` and closed: not an error
            sys.stderr.close()
            sys.exit(0)
        except KeyboardInterrupt:
            click.echo("rocketq: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except Exception as exc:
            if ctx.obj and ctx.obj.get("verbose"):
                raise
            click.echo(f"rocketq: error: {_one_line(exc)}", err=True)
            sys.exit(EXIT_ERROR)


def _one_line(exc: BaseException | str) -> str:
    text = " ".join(str(exc).split())
    # OSErrors carry their own wording ("[Errno 2] No such file or directory: 'x'"); others get
    # their class name when the message alone would be empty.
    return text or type(exc).__name__


@click.group(cls=_OneLineErrors)
@click.version_option(__version__, prog_name="rocketq")
@click.option("-v", "--verbose", is_flag=True, help="Log debug output and show tracebacks.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """rocketq: a RocketMQ-compatible message broker in Python."""
    ctx.obj = {"verbose": verbose}
    from rocketq.cli.log_setup import configure
    # warnings only: a command's output is its result (the servers switch to INFO, see log_setup)
    configure("DEBUG" if verbose else "WARNING", show_paths=verbose)
    # A long-running process that allocates many short-lived objects: collect young objects less
    # often (the store's hot paths create a few per message) - a standard server tuning.
    gc.set_threshold(50_000, 50, 100)


def _register() -> None:
    from rocketq.cli import bench_broker_cmd  # noqa: F401 (adds `bench broker`)
    from rocketq.cli import bench_cluster_cmd  # noqa: F401 (adds `bench cluster`)
    from rocketq.cli import bench_hostile_cmd  # noqa: F401 (adds `bench hostile`)
    from rocketq.cli import bench_spark_cmd  # noqa: F401 (adds `bench spark`)
    from rocketq.cli import bench_failover_cmd  # noqa: F401 (adds `bench failover`)
    from rocketq.cli.bench_cmd import bench
    from rocketq.cli.serve_cmd import broker, serve
    from rocketq.namesrv.cli import namesrv
    from rocketq.cli.run_cmd import run
    from rocketq.cli.spark_cmd import spark
    from rocketq.cli.store_cmd import store

    cli.add_command(run)
    cli.add_command(store)
    cli.add_command(spark)
    cli.add_command(bench)
    cli.add_command(serve)
    cli.add_command(broker)
    cli.add_command(namesrv)
    from rocketq.controller.cli import controller
    cli.add_command(controller)
    from rocketq.cli.admin_cmds import cluster, group, message, topic
    from rocketq.cli import operator_cmds  # noqa: F401 (adds `group reset-offset`, `broker config`)
    from rocketq.cli.messaging import consume, send
    from rocketq.cli.auth_cmds import acl, user
    for command in (send, consume, topic, group, cluster, message, user, acl):
        cli.add_command(command)
    from rocketq.cli.trace_cmd import trace
    message.add_command(trace)


_register()


def main() -> None:
    cli(prog_name="rocketq")


if __name__ == "__main__":
    main()
