"""Where a golden is: the instant answer to ``--golden goldens`` (the folder of goldens, not one).

``harness golden record`` writes ``goldens/<release>``; a newcomer then passes ``goldens``. Without
this check the command builds the model (20 s for the full one) and only then says "not a
complete golden (an interrupted write?)", which sends them looking for a crash. A folder with no
manifest of its own that holds goldens is named as what it is, with the goldens inside, before
any work. It reads directory entries only: no manifest is parsed here (the loader does that).
"""

from __future__ import annotations

from pathlib import Path

from harness.base.errors import GoldenError
from harness.base.fsio import is_temporary

MANIFEST = "manifest.json"
SHOWN = 8


def goldens_inside(folder: Path) -> list[Path]:
    """The complete-looking golden directories directly inside ``folder`` (a manifest each), sorted."""
    try:
        children = sorted(folder.iterdir())
    except OSError:
        return []
    return [c for c in children if c.is_dir() and not is_temporary(c.name) and (c / MANIFEST).is_file()]


def refuse_folder_of_goldens(path: str | Path, option: str = "--golden") -> None:
    """One line, at once, when ``path`` is a folder of goldens rather than a golden: it names them."""
    path = Path(path)
    if not path.is_dir() or (path / MANIFEST).exists():
        return
    inside = goldens_inside(path)
    if not inside:
        return
    names = ", ".join(str(p) for p in inside[:SHOWN]) + (
        f" (and {len(inside) - SHOWN} more)" if len(inside) > SHOWN else ""
    )
    raise GoldenError(f"{path}: not a golden; it holds {len(inside)}: {names} (pass one of them as {option})")
