"""The umscope commit a bench script's document names: the one written into the installed package when it
was built (umscope.provenance; $UMSCOPE_COMMIT where the caller sets it), never the git repository around
the current directory. `root` is kept for the callers' signature and not read."""
from umscope import provenance


def commit(root=None) -> str:
    return provenance.commit()
