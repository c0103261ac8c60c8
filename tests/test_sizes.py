import pytest

from conftest import umbench
from umscope.errors import UsageError
from umscope.sizes import format_size, parse_size

GOOD = [("4G", 4 << 30), ("4GiB", 4 << 30), ("512M", 512 << 20), ("1e9", 10**9), ("4096", 4096),
        ("4GB", 4 * 10**9), ("1.5K", 1536), ("2k", 2048), ("8MiB", 8 << 20)]
BAD = ["-1", "abc", "0", "", "4X", "1.5", "G", "1e-3", "4 Gigs"]


@pytest.mark.parametrize("text,value", GOOD)
def test_accepted_sizes(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", BAD)
def test_rejected_sizes(text):
    with pytest.raises(UsageError):
        parse_size(text)


@pytest.mark.parametrize("text,value", [g for g in GOOD if g[1] % 4096 == 0 and g[1] <= 8 << 20])
def test_umbench_reads_sizes_the_same_way(text, value):
    # The native runner reports the bytes it used in every record.
    res = umbench("run", "cpu-stream", "--kind", "system", "--bytes", text, "--reps", "1", "--warmup", "0",
                  "--threads", "1", "--ops", "read")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f'"bytes":{value},' in res.stdout


@pytest.mark.parametrize("text", ["-1", "abc", "0", "4X"])
def test_umbench_rejects_bad_sizes(text):
    res = umbench("run", "cpu-stream", "--kind", "system", "--bytes", text)
    assert res.returncode == 2
    assert '"status":"usage"' in res.stdout


def test_format_size():
    assert format_size(1 << 30) == "1 GiB"
    assert format_size(3 << 29) == "1.5 GiB"
    assert format_size(1000) == "1000 B"


def test_the_native_parser_agrees_with_pythons_on_generated_text():
    """umbench, umsim and libumalloc share core/sizes.cpp, a hand-written scanner of sizes.py's grammar (a
    std::regex there crashed PyTorch programs under `place --rule`): 3000 generated strings of digits, points,
    exponents, units, signs and spaces get the same value or the same refusal from both."""
    import random
    rnd = random.Random(20261127)
    alpha = list("0123456789.eE+- kKmMgGtTbBiIxX\t")
    texts = sorted({"".join(rnd.choice(alpha) for _ in range(rnd.randint(1, 8))) for _ in range(3000)}
                   | {"5.", ".5", "1e", "1e+", "1E-2K", " 4 KiB ", "1 e5", "e5", "4KiBB", "1e400", "9e18", "1e19"})
    res = umbench("parse-sizes", *texts)
    assert res.returncode == 0, res.stderr
    got = [line.rsplit("\t", 1)[1] for line in res.stdout.split("\n")[:-1]]
    assert len(got) == len(texts)
    for text, value in zip(texts, got):
        try:
            want = str(parse_size(text))
        except UsageError:
            want = None
        assert (value if value.isdigit() else None) == want, (text, value, want)
