"""The page: one self-contained HTML file with its figures embedded as PNG, drawn at the
size the page shows them (text 11 pt or larger), and the formatting every section shares."""

import base64
import html
import io
import os


BUCKET_COLORS = {
    "detection": "#d62728", "diagnosis": "#9467bd", "failover": "#ff7f0e", "restore": "#8c564b",
    "recompute": "#e377c2", "checkpoint": "#1f77b4", "degraded": "#bcbd22",
    "warmup": "#17becf", "waiting_for_machines": "#7f7f7f", "missing_replicas": "#2ca02c",
}
BUCKET_HELP = {
    "detection": "job broken, not yet acted on",
    "diagnosis": "stopped, diagnosing",
    "failover": "scheduling, image pull, init",
    "restore": "loading the checkpoint",
    "recompute": "work lost since the last checkpoint",
    "checkpoint": "blocking checkpoint saves",
    "degraded": "running slower than full speed",
    "warmup": "after a restart, before full speed",
    "waiting_for_machines": "no healthy machine free in a finite fleet",
    "missing_replicas": "training without dropped replicas, quorum changes",
}


# Figures are saved at DPI dots per inch and shown 1:1 by the page (whose content column is
# PAGE_PX wide), so a point of font is DPI/72 CSS pixels: 11 pt is about 15 px.
DPI = 100
PAGE_PX = 1240
FIG_W = 10.5  # inches: 1050 px, with room for tight bounding boxes
# text.parse_math off: labels carry text from the run (a crash message, a machine name), and
# matplotlib would read "$...$" in it as TeX and fail on what is not.
STYLE = {"font.size": 12, "axes.titlesize": 13, "axes.labelsize": 12, "xtick.labelsize": 11,
         "ytick.labelsize": 11, "legend.fontsize": 11, "legend.title_fontsize": 11, "figure.titlesize": 14,
         "text.parse_math": False}
SMALL = 11  # the smallest font size any figure uses (annotations, dense tick labels)


def unit_label(key):
    """Axis label with its unit, from the naming convention of scenario fields."""
    leaf = key.split(".")[-1]
    units = [("_per_machine_day", "per machine-day"), ("_per_job_day", "per job-day"), ("_days", "days"),
             ("_s", "s"), ("_h", "h"), ("_ms", "ms"), ("_us", "µs"), ("_gbps", "Gb/s"), ("_bytes", "bytes"),
             ("machines", "machines"), ("replicas", "replicas")]
    for suffix, unit in units:
        if leaf.endswith(suffix):
            return "%s (%s)" % (key, unit)
    return key


class Page:
    def __init__(self, title, png_dir=None):
        self.title = title
        self.parts = []
        self.png_dir = png_dir
        self.count = 0

    def h2(self, text, anchor=None):
        self.parts.append('<h2%s>%s</h2>' % (' id="%s"' % anchor if anchor else "", html.escape(text)))

    def h3(self, text):
        self.parts.append("<h3>%s</h3>" % html.escape(text))

    def p(self, text):
        self.parts.append("<p>%s</p>" % text)

    def raw(self, text):
        self.parts.append(text)

    def figure(self, fig, caption):
        import matplotlib.pyplot as plt
        titles = [fig._suptitle.get_text()] if getattr(fig, "_suptitle", None) else []
        titles += [ax.get_title() for ax in fig.axes if ax.get_title()]
        # Shown 1:1, so never wider than the page: a figure whose labels or legend push it
        # past PAGE_PX gets a narrower plot area (the text keeps its size).
        for _ in range(4):
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
            data = buf.getvalue()
            width = int.from_bytes(data[16:20], "big")  # PNG IHDR
            if width <= PAGE_PX:
                break
            w, h = fig.get_size_inches()
            fig.set_size_inches(max(2.0, w - (width - PAGE_PX + 8) / DPI), h)
        plt.close(fig)
        self.count += 1
        if self.png_dir:
            os.makedirs(self.png_dir, exist_ok=True)
            with open(os.path.join(self.png_dir, "figure-%02d.png" % self.count), "wb") as f:
                f.write(data)
        self.parts.append('<figure id="fig-%d"><img alt="%s" src="data:image/png;base64,%s">'
                          '<figcaption><b>Figure %d.</b> %s</figcaption></figure>'
                          % (self.count, html.escape(" | ".join(titles) or caption, quote=True),
                             base64.b64encode(data).decode("ascii"), self.count, html.escape(caption)))

    def html(self):
        style = ("body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;font-size:16px;line-height:1.45;"
                 "max-width:%dpx;margin:1.5em auto;padding:0 12px;color:#222}"
                 "h1{font-size:26px}h2{font-size:21px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:2em}"
                 "h3{font-size:18px}"
                 "figure{margin:1.2em 0 2em 0}img{display:block;max-width:100%%;height:auto}"
                 "figcaption{color:#444;font-size:15px;max-width:1000px;margin-top:6px}"
                 "table{border-collapse:collapse;font-size:15px;margin:0.6em 0}"
                 "td,th{border:1px solid #ccc;padding:4px 10px;text-align:right;white-space:nowrap}th{white-space:normal}"
                 "th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}"
                 ".better{color:#1a7f37}.worse{color:#c62828}.note{color:#555;font-size:15px}"
                 "td.text,th.text{text-align:left;white-space:normal;vertical-align:top}"
                 "td.acts{text-align:left;vertical-align:top;font-size:14px}"
                 "code{font-size:14px}" % (PAGE_PX + 24))
        # Checked by the headless-browser test: every figure decoded, none shown smaller than
        # it was drawn (so text stays legible at 100% zoom), no script error.
        script = ("<script>window.addEventListener('error',function(){var b=document.body;"
                  "b.setAttribute('data-script-errors',String(+(b.getAttribute('data-script-errors')||0)+1));});"
                  "window.addEventListener('load',function(){var b=document.body,imgs=document.querySelectorAll("
                  "'figure img'),ok=0,bad=0,min=1;for(var i=0;i<imgs.length;i++){var m=imgs[i];"
                  "if(m.complete&&m.naturalWidth>0){ok++;min=Math.min(min,m.clientWidth/m.naturalWidth);}"
                  "else bad++;}b.setAttribute('data-figures',String(imgs.length));"
                  "b.setAttribute('data-figures-decoded',String(ok));b.setAttribute('data-figures-broken',"
                  "String(bad));b.setAttribute('data-min-scale',min.toFixed(3));});</script>")
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style>"
                "%s</head><body><h1>%s</h1>\n%s\n</body></html>\n"
                % (html.escape(self.title), style, script, html.escape(self.title), "\n".join(self.parts)))


def stack_colors(labels):
    import matplotlib.pyplot as plt
    cmap = plt.get_cmap("tab10")
    return {lab: cmap(i % 10) for i, lab in enumerate(labels)}


def pct(x, digits=2):
    return "%.*f%%" % (digits, 100 * x)


def pp(x, digits=2):
    return "%+.*f" % (digits, 100 * x)


def fmt_dur(s):
    """A duration as a reader wants it: seconds, minutes, hours or days."""
    s = float(s)
    if abs(s) < 10:
        return "%.2f s" % s
    if abs(s) < 120:
        return "%.1f s" % s
    if abs(s) < 7200:
        return "%.1f min" % (s / 60.0)
    if abs(s) < 172800:
        return "%.2f h" % (s / 3600.0)
    return "%.2f days" % (s / 86400.0)


def time_axis(elapsed_s):
    """(divisor, unit) for a time axis spanning elapsed_s: the run's own scale."""
    if elapsed_s < 7200:
        return 60.0, "minutes"
    if elapsed_s < 172800:
        return 3600.0, "hours"
    return 86400.0, "days"
