"""The umscope commit a bench script's document names: $UMSCOPE_COMMIT where the caller knows it (a copy
of the tree on a GPU machine may carry a stale .git), else git's HEAD, marked -dirty when the tree
differs from it; "unknown" without either."""
import os
import subprocess


def commit(root) -> str:
    if os.environ.get("UMSCOPE_COMMIT"):
        return os.environ["UMSCOPE_COMMIT"]
    git = ["git", "-C", str(root)]
    head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    if not head:
        return "unknown"
    dirty = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    return head + ("-dirty" if dirty else "")
