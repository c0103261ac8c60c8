"""The umscope commit a bench script's document names: the one written into the installed package when it
was built (umscope.provenance; $UMSCOPE_COMMIT where the caller sets it), never the git repository around
the current directory. `root` is kept for the callers' signature and not read."""
from umscope import provenance


def commit(root=None) -> str:
    return provenance.commit()


def validated_path():
    """Where a validation script writes its entry of model/validated.json by default: the source tree's file
    beside this bench/ (what is committed and what the next install packages) where there is one, else the
    installed package's (calibrated.VALIDATED). Writing only the installed copy left the repository's stale."""
    from pathlib import Path
    from umscope.model import calibrated
    mine = Path(__file__).resolve().parent.parent / "python" / "umscope" / "model" / "validated.json"
    return mine if mine.exists() else calibrated.VALIDATED
