"""`python -m umscope` and the `umscope` command.

The signal handlers go in before the CLI's imports: a SIGINT, SIGTERM or SIGHUP that arrives while
umscope starts (nothing has run yet) ends it with 128 + the signal, never a traceback. From main() on,
the CLI's own handlers end a run cleanly (suite.handle_signals). Once main() has returned, the work is
done and its exit status decided: the three are ignored from then on, because Python puts back their
default action while it shuts down, and a signal in that moment would end a finished run as killed."""

import signal


def _starting(signum, _frame):
    raise SystemExit(128 + signum)


def run() -> int:
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _starting)
    from umscope.cli import main
    code = main()
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    return code


if __name__ == "__main__":
    raise SystemExit(run())
