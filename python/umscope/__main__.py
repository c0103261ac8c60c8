"""`python -m umscope` and the `umscope` command.

The signal handlers go in before the CLI's imports: a SIGINT, SIGTERM or SIGHUP that arrives while
umscope starts (nothing has run yet) ends it with 128 + the signal, never a traceback. From main() on,
the CLI's own handlers end a run cleanly (suite.handle_signals)."""

import signal


def _starting(signum, _frame):
    raise SystemExit(128 + signum)


def run() -> int:
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _starting)
    from umscope.cli import main
    return main()


if __name__ == "__main__":
    raise SystemExit(run())
