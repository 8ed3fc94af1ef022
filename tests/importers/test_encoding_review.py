"""A file that is not UTF-8 is one line naming where: the line of the first bad byte, or, for a
UTF-16 file (as Windows PowerShell's `>` writes), that it is UTF-16."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run

from car.errors import InputError
from car.jsonfile import read_json

CHAT = {
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Sunny."},
    ]
}


@pytest.mark.parametrize(
    ("encode", "said"),
    [
        (lambda t: t.replace("Paris", "Pàris").encode("latin-1"), "line 9 (byte 123): not UTF-8 text"),
        (
            lambda t: t.encode("utf-16"),  # with its byte order mark, as PowerShell writes it
            "UTF-16 text (it starts with a UTF-16 byte order mark), not UTF-8: save it as UTF-8",
        ),
    ],
)
def test_a_file_that_is_not_utf8_says_where_or_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], encode: object, said: str
) -> None:
    f = tmp_path / "chat.json"
    text = json.dumps(CHAT, indent=1)
    assert callable(encode)
    f.write_bytes(encode(text))
    for command in (["validate"], ["import", "-o", str(tmp_path / "t.json")]):
        assert run([command[0], str(f), *command[1:]]) == 2
        assert capsys.readouterr().err == f"car: error: {f}: {said}\n"
    with pytest.raises(InputError) as info:
        read_json(f, what="a JSON trace")
    assert str(info.value) == f"{f}: {said}"


def test_a_gzip_compressed_log_says_to_decompress_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import gzip

    f = tmp_path / "chat.json.gz"
    f.write_bytes(gzip.compress(json.dumps(CHAT).encode()))
    assert run(["validate", str(f)]) == 2
    assert capsys.readouterr().err == (
        f"car: error: {f}: a gzip-compressed file, not UTF-8 text: decompress it first (gunzip FILE)\n"
    )
