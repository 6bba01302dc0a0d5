"""Extract the checker's sample battles (edge/samples/*.json.gz) from the test recordings.

Each sample is one player's frames of one recording in tests/fixtures/battles, chosen to cover a
team preview, forced switches, tera and both gen9bssfactory and gen9randombattle. Run from the
repository root: ``.venv/bin/python scripts/make_checker_samples.py``.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "fixtures" / "battles"
TARGET = ROOT / "edge" / "samples"

# (sample name, recording file, index of the player in the recording)
SAMPLES = [
    ("gen9bssfactory", "gen9bssfactory-2.json.gz", 0),
    ("gen9bssregi", "gen9bssregi-1.json.gz", 0),
    ("gen9randombattle", "gen9randombattle-1.json.gz", 0),
]


def main() -> int:
    """Write every sample; print what was written."""
    for name, source, player in SAMPLES:
        document = json.loads(gzip.decompress((SOURCE / source).read_bytes()))
        username = list(document["frames"])[player]
        sample = {
            "format": document["format"],
            "battle_tag": document["battle_tag"],
            "source": f"tests/fixtures/battles/{source}",
            "frames": {username: document["frames"][username]},
        }
        data = json.dumps(sample, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        target = TARGET / f"{name}.json.gz"
        # mtime=0: the same input gives byte-identical files.
        target.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
        print(
            f"{target.relative_to(ROOT)}: {len(sample['frames'][username])} frames, "
            f"{target.stat().st_size} bytes"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
