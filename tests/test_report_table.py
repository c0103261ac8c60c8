"""report.common.html_table, the one helper every report table is drawn with: escaping, cells with classes and
spans, heading rows, row classes, the note, and what it draws without rows."""

from html.parser import HTMLParser

from umscope.report.common import Row, bound_cells, cell, html_table, num_cell, records_table, th


class _Tree(HTMLParser):
    """(tag, attrs, text) of every cell, in order, as a browser's parser reads them."""

    def __init__(self, html):
        super().__init__(convert_charrefs=True)
        self.cells, self.rows, self.tags, self._cur = [], [], [], None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append(dict(attrs))
        if tag in ("td", "th"):
            self._cur = [tag, dict(attrs), ""]
            self.cells.append(self._cur)

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self._cur = None

    def handle_data(self, data):
        if self._cur is not None:
            self._cur[2] += data


def test_cells_are_escaped_unless_given_as_html():
    hostile = "<script>alert('x')</script> & \"q\""
    html = html_table([hostile, "b"], [[hostile, cell(html="<b>bold</b>")], [None, 0]])
    assert "<script>" not in html
    t = _Tree(html)
    # the text a reader sees is the original string, in heading and cell alike
    assert [c[2] for c in t.cells] == [hostile, "b", hostile, "bold", "", "0"]
    assert [c[0] for c in t.cells] == ["th", "th", "td", "td", "td", "td"]
    assert "b" in t.tags  # html= is drawn as markup


def test_classes_spans_row_classes_and_heading_rows():
    html = html_table([[th("GPU", rowspan=2), th("GB/s", colspan=2)], ["alone", "loaded"]],
                      [Row([th("row"), num_cell("1.5"), num_cell("-20%", flag=True)], cls="pub"),
                       [cell("x", "c pub\" onload=\"y"), cell("not run", "note", colspan=2)]])
    t = _Tree(html)
    assert t.cells[0] == ["th", {"rowspan": "2"}, "GPU"]
    assert t.cells[1] == ["th", {"colspan": "2"}, "GB/s"]
    assert [c[0] for c in t.cells[2:4]] == ["th", "th"]  # the second heading row is headings too
    assert t.rows[2] == {"class": "pub"} and t.rows[3] == {}
    assert t.cells[4] == ["th", {}, "row"]  # a row's own heading among its cells
    assert t.cells[5] == ["td", {"class": "num"}, "1.5"]
    assert t.cells[6] == ["td", {"class": "num flag"}, "-20%"]
    # a class with quotes stays one attribute value: nothing is injected
    assert t.cells[7] == ["td", {"class": "c pub\" onload=\"y"}, "x"]
    assert t.cells[8] == ["td", {"colspan": "2", "class": "note"}, "not run"]
    assert html.count("<tr") == 4 and html.startswith("<table>") and html.endswith("</table>")


def test_note_follows_the_table_and_no_rows_draws_nothing_or_the_empty_text():
    html = html_table(["a"], [[1]], "Medians; <code>x</code>.")
    assert html.endswith("</table><p class=note>Medians; <code>x</code>.</p>")
    assert "<p" not in html_table(["a"], [[1]])
    # no rows: no table and no note (a heading with nothing under it says nothing), or the caller's text
    assert html_table(["a"], [], "a note") == ""
    assert html_table(["a"], iter(()), "a note", empty="<p>None: every case ran.</p>") == "<p>None: every case ran.</p>"
    # rows from a generator are drawn, not consumed by the emptiness test
    assert _Tree(html_table(["a"], (x for x in [[1], [2]]))).cells[1:] == [["td", {}, "1"], ["td", {}, "2"]]
    # no heading row
    assert not any(c[0] == "th" for c in _Tree(html_table(None, [["v"]])).cells)


def test_records_table_bound_cells_and_flagged_spread():
    rec = {"op": "read", "processor": "gpu0", "kind": "device", "policy": "", "bytes": 1 << 30, "threads": None,
           "median": 1900.0, "min": 1800.0, "max": 2000.0, "unit": "GB/s", "n": 5, "spread": 0.2,
           "extra": {"bound": 2000.0, "efficiency": 0.95, "datapath": "HBM<3>", "bound_source": "spec"}}
    # The flag's threshold follows the family's noise: three times its median spread (here 1.2%), at least 5%.
    quiet = dict(rec, spread=0.012)
    t = _Tree(records_table([rec, dict(rec, spread=0.01, extra={"bound_note": "no bound: <why>"}), quiet]))
    assert "above 5.0%: three times this family&#x27;s median spread (1.2%)" in records_table([rec, quiet, quiet])
    noisy = [dict(rec, spread=s) for s in (0.2, 0.25, 0.3)]  # a noisy family: 20% is its usual, not flagged
    assert "⚠" not in records_table(noisy).split("<p")[0]
    heads = [c[2] for c in t.cells if c[0] == "th"]
    assert heads[:3] == ["op", "processor", "kind [policy]"] and heads[-3:] == ["bound", "of bound", "limit"]
    body = [c for c in t.cells if c[0] == "td"]
    first, second = body[:14], body[14:28]
    assert first[10] == ["td", {"class": "num flag"}, "20.0% ⚠"]
    assert first[11:] == [["td", {"class": "num"}, "2000"], ["td", {"class": "num"}, "95%"],
                          ["td", {}, "HBM<3> (spec)"]]
    assert second[10] == ["td", {"class": "num"}, "1.0%"]
    assert second[11] == ["td", {"colspan": "3", "class": "note"}, "no bound: <why>"]
    assert len(bound_cells(rec)) == 3 and records_table([]) == ""
