"""The ``rocketq`` command line: one click group, one module per command family."""

from __future__ import annotations

import gc
import logging
import sys

import click

from rocketq import __version__


class _OneLineErrors(click.Group):
    """Operational errors become one clear line and exit code 1 (tracebacks only with -v)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except BrokenPipeError:        # output piped into `head` and closed: not an error
            sys.stderr.close()
            sys.exit(0)
        except Exception as exc:
            if ctx.obj and ctx.obj.get("verbose"):
                raise
            click.echo(f"rocketq: error: {exc}", err=True)
            sys.exit(1)


@click.group(cls=_OneLineErrors)
@click.version_option(__version__, prog_name="rocketq")
@click.option("-v", "--verbose", is_flag=True, help="Log debug output and show tracebacks.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """rocketq: a RocketMQ-compatible message broker in Python."""
    ctx.obj = {"verbose": verbose}
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # A long-running process that allocates many short-lived objects: collect young objects less
    # often (the store's hot paths create a few per message) - a standard server tuning.
    gc.set_threshold(50_000, 50, 100)


def _register() -> None:
    from rocketq.cli.bench_cmd import bench
    from rocketq.cli.broker_cmd import broker
    from rocketq.cli.run_cmd import run
    from rocketq.cli.store_cmd import store

    cli.add_command(store)
    cli.add_command(run)
    cli.add_command(bench)
    cli.add_command(broker)


_register()


def main() -> None:
    cli(prog_name="rocketq")


if __name__ == "__main__":
    main()
