"""Write the course's website as static HTML from the page content Jupyter Book 2 (mystmd) serves.

`jupyter-book build --html` runs this file (template.yml's `build.render`) in this folder with two
variables: CONTENT_CDN, the address of MyST's content server (config.json, content/<slug>.json and
the files a page refers to), and BUILD_DIRECTORY, where the site goes. Every page becomes
`<slug>.html` (the first page `index.html`) beside `style.css` and the images, so the site works
from a plain folder, a static host, or a file:// URL. Python's standard library only.

Notebook outputs are shown as they were stored in the executed notebook; an ipywidgets widget is
shown as the snapshot its state holds (its text and the plot its Output area held), marked as such,
or, where no state was stored, as a note that it runs in JupyterLab (never as its Python repr).
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import sys
import urllib.parse
import urllib.request
from pathlib import Path

CDN = os.environ.get("CONTENT_CDN", "").rstrip("/")
OUT = Path(os.environ.get("BUILD_DIRECTORY", "_build/html"))
HERE = Path(__file__).resolve().parent
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
#: The text an ipywidgets widget leaves when its state is not stored: its repr, "VBox(children=(HTML(value=''), ...".
WIDGET_REPR = re.compile(r"^\s*(?:\w*Box|\w*Slider|\w*Progress|Dropdown|Button|HTML|HTMLMath|Label|Output|Tab|Accordion)"
                         r"\((?:children=|value=|description=|options=|layout=|outputs=|\))")
WIDGET_FALLBACK = ('<div class="widget"><p class="widget-note">An interactive widget: it runs when the notebook is open in '
                   "JupyterLab (this record kept no snapshot of it).</p></div>")


def fetch(path: str) -> bytes:
    with urllib.request.urlopen(f"{CDN}/{path.lstrip('/')}") as response:
        return response.read()


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


class Page:
    """Renders one page's MyST AST to HTML; `files` collects the files (images, downloads) it refers to."""

    def __init__(self, data: dict, slugs: dict[str, str]):
        self.data = data
        self.slugs = slugs  # "/first-kernels" -> "first-kernels.html"
        self.files: set[str] = set()
        state = (data.get("widgets") or {}).get(WIDGET_STATE, {})
        self.widgets: dict[str, dict] = state.get("state", {}) if isinstance(state, dict) else {}

    # -- links and files --------------------------------------------------------------------------
    def href(self, url: str) -> str:
        if not url or re.match(r"^[a-z][a-z0-9+.-]*:", url, re.I) or url.startswith("#"):
            return url  # external (http:, mailto:) or an anchor on this page
        path, _, fragment = url.partition("#")
        if path in self.slugs:
            target = self.slugs[path]
        elif path.startswith("/") and Path(path).suffix:  # a file MyST copied into the site (image, download)
            self.files.add(path)
            target = path.lstrip("/")
        else:
            target = path  # left as written: the link check reports it if nothing is there
        return target + (f"#{fragment}" if fragment else "")

    def image_file(self, data: str, suffix: str) -> str:
        import hashlib

        raw = base64.b64decode(data)
        name = f"widget-{hashlib.sha256(raw).hexdigest()[:16]}{suffix}"
        (OUT / name).write_bytes(raw)
        return name

    # -- nodes ------------------------------------------------------------------------------------
    def children(self, node: dict) -> str:
        return "".join(self.node(child) for child in node.get("children", []))

    def node(self, node: dict) -> str:
        kind = node.get("type", "")
        method = getattr(self, f"n_{kind}", None)
        return method(node) if method else self.children(node)

    def n_text(self, node):
        return esc(node.get("value", ""))

    def n_paragraph(self, node):
        return f"<p>{self.children(node)}</p>\n"

    def n_heading(self, node):
        depth = min(int(node.get("depth", 2)), 6)
        ident = node.get("html_id") or node.get("identifier") or ""
        anchor = f' id="{esc(ident)}"' if ident else ""
        return f"<h{depth}{anchor}>{self.children(node)}</h{depth}>\n"

    def n_emphasis(self, node):
        return f"<em>{self.children(node)}</em>"

    def n_strong(self, node):
        return f"<strong>{self.children(node)}</strong>"

    def n_delete(self, node):
        return f"<del>{self.children(node)}</del>"

    def n_subscript(self, node):
        return f"<sub>{self.children(node)}</sub>"

    def n_superscript(self, node):
        return f"<sup>{self.children(node)}</sup>"

    def n_break(self, node):
        return "<br>"

    def n_thematicBreak(self, node):
        return "<hr>\n"

    def n_inlineCode(self, node):
        return f"<code>{esc(node.get('value', ''))}</code>"

    def n_code(self, node):
        lang = node.get("lang") or ""
        return f'<pre class="code" data-lang="{esc(lang)}"><code>{esc(node.get("value", ""))}</code></pre>\n'

    def n_blockquote(self, node):
        return f"<blockquote>{self.children(node)}</blockquote>\n"

    def n_list(self, node):
        tag = "ol" if node.get("ordered") else "ul"
        start = f' start="{int(node["start"])}"' if node.get("ordered") and node.get("start") not in (None, 1) else ""
        return f"<{tag}{start}>{self.children(node)}</{tag}>\n"

    def n_listItem(self, node):
        return f"<li>{self.children(node)}</li>\n"

    def n_link(self, node):
        return f'<a href="{esc(self.href(node.get("url", "")))}">{self.children(node)}</a>'

    def n_crossReference(self, node):
        url = node.get("url") or (f"#{node['identifier']}" if node.get("identifier") else "")
        url += f"#{node['html_id']}" if node.get("remote") and node.get("html_id") and "#" not in url else ""  # a heading on another page
        return f'<a href="{esc(self.href(url))}">{self.children(node)}</a>'

    def n_image(self, node):
        return f'<img src="{esc(self.href(node.get("url", "")))}" alt="{esc(node.get("alt", ""))}">'

    def n_table(self, node):
        return f'<div class="table-wrap"><table>{self.children(node)}</table></div>\n'  # a wide table scrolls inside the page

    def n_tableRow(self, node):
        return f"<tr>{self.children(node)}</tr>\n"

    def n_tableCell(self, node):
        tag = "th" if node.get("header") else "td"
        align = f' style="text-align:{esc(node["align"])}"' if node.get("align") else ""
        return f"<{tag}{align}>{self.children(node)}</{tag}>"

    def n_math(self, node):
        return f'<div class="math">{node.get("html") or esc(node.get("value", ""))}</div>\n'

    def n_inlineMath(self, node):
        return node.get("html") or f"<code>{esc(node.get('value', ''))}</code>"

    def n_html(self, node):
        return node.get("value", "")

    def n_comment(self, node):
        return ""

    def n_admonition(self, node):
        kind = esc(node.get("kind", "note"))
        return f'<aside class="admonition {kind}">{self.children(node)}</aside>\n'

    def n_admonitionTitle(self, node):
        return f'<p class="admonition-title">{self.children(node)}</p>'

    def n_container(self, node):
        return f"<figure>{self.children(node)}</figure>\n"

    def n_caption(self, node):
        return f"<figcaption>{self.children(node)}</figcaption>"

    def n_block(self, node):
        inner = self.children(node)
        if node.get("kind") == "notebook-code":
            return f'<div class="cell">{inner}</div>\n'
        return inner

    def n_outputs(self, node):
        inner = self.children(node)
        return f'<div class="outputs">{inner}</div>\n' if inner else ""

    def n_output(self, node):
        return self.output(node.get("jupyter_data") or {})

    # -- notebook outputs ---------------------------------------------------------------------------
    def output(self, out: dict) -> str:
        kind = out.get("output_type")
        if kind == "stream":
            css = "stderr" if out.get("name") == "stderr" else "stdout"
            return f'<pre class="output {css}">{esc(ANSI.sub("", text_of(out.get("text", ""))))}</pre>'
        if kind == "error":
            trace = ANSI.sub("", "\n".join(out.get("traceback") or [f"{out.get('ename')}: {out.get('evalue')}"]))
            return f'<pre class="output error">{esc(trace)}</pre>'
        return self.mime(out.get("data") or {})

    def mime(self, data: dict) -> str:
        def content(key):
            value = data[key]
            return value.get("content", "") if isinstance(value, dict) else text_of(value)

        if WIDGET_VIEW in data:
            try:
                model_id = json.loads(content(WIDGET_VIEW))["model_id"]
            except (ValueError, KeyError, TypeError):
                model_id = ""
            if model_id in self.widgets:
                return ('<div class="widget"><p class="widget-note">Interactive widget: a snapshot of its state when the '
                        f'notebook ran. Open the notebook in JupyterLab to use it.</p>{self.widget(model_id)}</div>')
            return WIDGET_FALLBACK  # never its repr
        if set(data) <= {"text/plain"} and "text/plain" in data and WIDGET_REPR.match(content("text/plain")):
            return WIDGET_FALLBACK  # a widget whose view and state a record dropped: its repr is no output to read
        described = content("text/plain") if "text/plain" in data else ""
        alt = esc(described[1:-1] if described.startswith("<Figure: ") else "plot")  # gpucourse's words for a figure
        for key in ("image/svg+xml", "image/png", "image/jpeg", "image/gif"):
            if key in data:
                value = data[key]
                if isinstance(value, dict) and value.get("path"):
                    return f'<img class="output" src="{esc(self.href(value["path"]))}" alt="{alt}">'
                if key == "image/svg+xml":
                    return f'<div class="output">{content(key)}</div>'
                name = self.image_file(content(key), "." + key.split("/")[1])
                return f'<img class="output" src="{esc(name)}" alt="{alt}">'
        if "text/html" in data:
            return f'<div class="output html">{content("text/html")}</div>'
        if "text/markdown" in data:
            return f'<pre class="output">{esc(content("text/markdown"))}</pre>'
        if "text/plain" in data:
            return f'<pre class="output">{esc(ANSI.sub("", content("text/plain")))}</pre>'
        return ""

    def widget(self, model_id: str, depth: int = 0) -> str:
        """A static snapshot of an ipywidgets model: boxes, labelled controls with their values, HTML, Output areas."""
        model = self.widgets.get(model_id)
        if model is None or depth > 8:
            return ""
        name, state = model.get("model_name", ""), model.get("state", {})
        kids = [c[len("IPY_MODEL_"):] for c in state.get("children", []) if isinstance(c, str) and c.startswith("IPY_MODEL_")]
        if kids:
            return "".join(self.widget(kid, depth + 1) for kid in kids)
        description = esc(state.get("description", ""))
        if name in ("HTMLModel", "HTMLMathModel", "LabelModel"):
            value = state.get("value", "")
            return f'<div class="widget-html">{value if name != "LabelModel" else esc(value)}</div>'
        if name == "OutputModel":
            return "".join(self.output(out) for out in state.get("outputs", []))
        if name == "ButtonModel":
            return f'<p class="widget-control"><span class="widget-button">{description}</span></p>'
        if "index" in state and "_options_labels" in state:
            labels = state.get("_options_labels") or []
            index = state.get("index")
            value = labels[index] if isinstance(index, int) and index < len(labels) else ""
            return f'<p class="widget-control">{description}: <b>{esc(value)}</b></p>'
        if "value" in state:
            return f'<p class="widget-control">{description}: <b>{esc(state["value"])}</b></p>'
        return ""


def text_of(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


#: A part of the table of contents the sidebar leaves out (book/build.py's HIDDEN_PART): its pages are reached from a page's table.
HIDDEN_PART = "Every record"


def nav_html(pages: list[dict], current: str) -> str:
    """The sidebar: every page and part of the table of contents, less the hidden part and the pages under it."""
    items = []
    hidden_below: int | None = None  # the level of a hidden part being skipped
    for page in pages:
        level = int(page.get("level", 1))
        if hidden_below is not None and level > hidden_below:
            continue
        hidden_below = None
        if not page.get("file_name") and page.get("title") == HIDDEN_PART:
            hidden_below = level
            continue
        title = esc(page.get("title") or page.get("slug", ""))
        if page.get("file_name"):
            css = ' class="current"' if page["file_name"] == current else ""
            items.append(f'<li class="level{level}"><a{css} href="{esc(page["file_name"])}">{title}</a></li>')
        else:
            items.append(f'<li class="level{level} part">{title}</li>')
    return "<ul>" + "".join(items) + "</ul>"


def main() -> int:
    if not CDN:
        print("render.py runs inside `jupyter-book build --html` (CONTENT_CDN is not set)", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    config = json.loads(fetch("config.json"))
    project = config["projects"][0]
    site_title = project.get("title", "")
    pages = [{"slug": project["index"], "title": site_title, "level": 1}] + list(project.get("pages", []))
    for page in pages:
        if page.get("slug"):
            page["file_name"] = "index.html" if page["slug"] == project["index"] else f"{page['slug']}.html"
    slugs = {f"/{p['slug']}": p["file_name"] for p in pages if p.get("slug")}
    slugs["/"] = "index.html"
    readable = [p for p in pages if p.get("slug")]
    files: set[str] = set()
    written: dict[str, str] = {}  # source file ("/chapters/01_introduction/01_first_kernels.ipynb") -> page
    template = (HERE / "page.html").read_text(encoding="utf-8")
    for number, page in enumerate(readable):
        data = json.loads(fetch(f"content/{page['slug']}.json"))
        renderer = Page(data, slugs)
        body = renderer.node(data["mdast"])
        files |= renderer.files
        title = data.get("frontmatter", {}).get("title") or page.get("title") or ""
        before = readable[number - 1] if number > 0 else None
        after = readable[number + 1] if number + 1 < len(readable) else None
        pager = "".join([
            f'<a class="prev" href="{esc(before["file_name"])}">&larr; {esc(before.get("title", ""))}</a>' if before else "<span></span>",
            f'<a class="next" href="{esc(after["file_name"])}">{esc(after.get("title", ""))} &rarr;</a>' if after else "<span></span>",
        ])
        heading = f"<h1>{esc(title)}</h1>\n"
        text = (template.replace("{{site_title}}", esc(site_title)).replace("{{title}}", esc(title))
                .replace("{{nav}}", nav_html(pages, page["file_name"])).replace("{{pager}}", pager)
                .replace("{{body}}", heading + body))
        (OUT / page["file_name"]).write_text(text, encoding="utf-8")
        written[data.get("location", "")] = page["file_name"]
    for path in sorted(files):
        target = OUT / urllib.parse.unquote(path.lstrip("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(fetch(path))
    shutil.copy(HERE / "style.css", OUT / "style.css")
    (OUT / "pages.json").write_text(json.dumps(written, indent=1, sort_keys=True), encoding="utf-8")  # for tests and tools
    print(f"rendered {len(readable)} pages and {len(files)} files into {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
