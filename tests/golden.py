"""Golden text files a reviewer reads in the diff: one syrupy snapshot per file in a fixtures folder."""

from pathlib import Path
from typing import Callable

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode


def text_files(folder: Path, name: Callable[[str], str]) -> type[SingleFileSnapshotExtension]:
    """Snapshots as ``<folder>/<name(test's snapshot name)>.txt``."""

    class TextFile(SingleFileSnapshotExtension):
        _write_mode = WriteMode.TEXT
        file_extension = "txt"

        @classmethod
        def dirname(cls, *, test_location):
            return str(folder)

        @classmethod
        def get_snapshot_name(cls, *, test_location, index=0):
            return name(test_location.snapshot_name)

    return TextFile
