"""The report's "Modelled (not measured)" section: the calibrated model's predictions for the run's
applications, each beside the measurement of the same case, its error in this run and the model's validated
error for that case; the simulator's what-if commands named. Drawn apart from the measured sections
(hatched frame, its own heading) and labelled with the model version and its inputs."""

from collections import OrderedDict

from umscope.errors import UsageError
from umscope.report.common import e, html_table, num_cell
from umscope.report.registry import page_section

_STYLE = ("border:2px dashed #8a6d00;background:repeating-linear-gradient(45deg,#fffbea,#fffbea 10px,#fff6d5 10px,"
          "#fff6d5 20px);padding:8px 14px;margin-top:28px")

TITLE = "Modelled (not measured)"


def _machine_of(fp) -> str:
    names = " ".join(g.get("name", "") for g in ((fp or {}).get("gpus") or []))
    if "GH200" in names:
        return "gh200"
    if "H100" in names:
        return "h100-sxm-pcie5"
    return ""


def _calib(r) -> dict:
    x = r.get("extra") or {}
    return dict(x, data_bytes=r.get("bytes") or x.get("data_bytes") or 0)


# The configuration the calibrated model was validated in (bench/model_validate.py): gemm is cuBLAS's fp32
# kernel with every matrix in the run's mode; other configurations are modelled but not validated.
VALIDATED_CONFIG = {"variant": ("cublas",), "precision": ("fp32",), "place_a": ("mode",), "place_b": ("mode",),
                    "place_c": ("mode",)}


def _config(x) -> tuple:
    return tuple((k, x.get(k)) for k in VALIDATED_CONFIG if x.get(k) is not None)


def _median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def section(records, fp) -> str:
    """HTML of the modelled section, or '' when the run has no application records."""
    from umscope.model import calibrated, dos
    apps = OrderedDict()
    for r in records:
        x = r.get("extra") or {}
        if r.get("op") == "app" and x.get("app") in calibrated.ACCESS and x.get("mode"):
            apps.setdefault((x["app"], r.get("bytes"), _config(x)), {})[x["mode"]] = r
    if not apps:
        return ""
    machine = _machine_of(fp)
    head = (f"<section style=\"{_STYLE}\"><h2 id=modelled>{TITLE}</h2>"
            "<p class=note>Everything in this frame is a model output, not a measurement of this run, except the "
            "column <b>measured ms</b>: this run's measurement of the same case, for comparison. ")
    if not machine:
        return head + ("No model figures for this GPU (known: H100 on PCIe, GH200): nothing modelled.</p>"
                       "</section>")
    try:
        fig, src = dos.machine_figures(machine)
    except UsageError as err:
        return head + f"{e(err)}</p></section>"
    v = calibrated.validated_model(packaged=True)
    validated_here = machine == "h100-sxm-pcie5" and "median" in v
    where = ("" if validated_here else
             f" It was validated on {e(v.get('machine', 'another machine'))} only, not on this machine's kind.")
    out = [head + f"Inputs: calibrated model {e(calibrated.VERSION)}; each application's explicit-mode case of this "
           f"run is the calibration (kernel time, fixed phases); machine figures: {e(src)}. The error column "
           "compares the prediction with this run's measurement of the same case; the validated error is the "
           "model's error for that case in its held-out validation. "
           f"Model {e(calibrated.validated_text(v))}.{where}</p>"]
    errs, rows = [], []
    for (app, nbytes, config), modes in apps.items():
        cal = modes.get("explicit")
        if not cal:
            continue
        for m, r in modes.items():
            if m == "explicit":
                continue
            try:
                p = calibrated.predict(app, m, _calib(cal), fig, ats=machine == "gh200")
            except (ValueError, KeyError):
                continue
            meas = (r.get("extra") or {}).get("total_ms")
            err = (p["total_ms"] - meas) / meas if meas else None
            if err is not None:
                errs.append(abs(err))
            this = calibrated.validated_model(app, m, packaged=True).get("this_case")
            valid = all(v_ in VALIDATED_CONFIG[k] for k, v_ in config)
            vtext = (f"{this:+.1%}" if validated_here and valid and this is not None else "not validated")
            name = app + "".join(f" {v_}" for k, v_ in config if v_ not in VALIDATED_CONFIG[k])
            rows.append([name, num_cell(f"{round((nbytes or 0) / 2 ** 20)} MiB"), m,
                         num_cell(f"{p['total_ms']:.1f}"), num_cell("" if meas is None else f"{meas:.1f}"),
                         num_cell("" if err is None else f"{err:+.1%}"), num_cell(vtext)])
    out.append(html_table(["application", "bytes", "mode", "predicted ms", "measured ms", "error in this run",
                           "validated error"], rows))
    if errs:
        out.append(f"<p class=note>|error| over {len(errs)} cases of this run: median {_median(errs):.1%}, "
                   f"largest {max(errs):.1%}.</p>")
    out.append("<p class=note>What-if beyond this machine: <code>umscope advise APP --machine gh200</code>, "
               "<code>umscope simulate APP --dos 150</code>, <code>umscope simulate --sweep all</code> "
               "(simulator umsim; see docs/simulator.md).</p></section>")
    return "\n".join(out)


@page_section("modelled", TITLE, order=140)
def _page(page) -> str:
    return section(page.records, page.fp)
