"""``bench_structured.py``'s items: documents of shapes the evaluation set does not have.

Its kinds, each seeded so a run is reproducible:

- **records generated in code**, one fact a question asks for hidden among look-alikes:
  ``tables`` (markdown tables of hosts: the row of one host), ``logs`` (service logs: the one
  error line of an order), ``code`` (Python modules: the constant one function sets),
  ``records`` (JSON exports: one account's field); and indented records (``config_data``:
  ``INDENTED``): ``configs`` (compose files: one service's timeout among its fields) and
  ``manifests`` (Kubernetes Deployments: one's memory limit, five levels below its name);
- **the NQ passages re-laid**: ``long_document`` (one item's passages, shuffled, as the
  sections of one document, each under its title), ``untitled4`` (four passages to a chunk,
  in their order, with no titles: most splitters drop a page's title from its chunks),
  ``template_other4`` (four titled passages to a chunk, the question inside a prompt template
  the shape suite does not use, no ``Request.query``) and ``html4`` (four passages to a chunk
  as a web page a loader kept the markup of: each passage a ``<section>`` under its ``<h2>``
  title, its text HTML-escaped, between the site's navigation and footer; the answers count
  as written or escaped), ``langchain500`` and ``tokens256`` (the passages joined and cut
  smaller than the shape suite cuts them: ``shapes_data.small_splitters``), and
  ``langchain500_placed`` (the same 500-character pieces with the metadata LangChain gives
  them under ``add_start_index=True``: ``shapes_data.placed_pieces``), and ``transcript4``
  (four titled passages to a chunk as speech-to-text writes them: lower case, no punctuation,
  one run-on line, so no sentence ends; the evidence check normalises case and punctuation
  away, so the answers count as they are), and ``pages4`` (four titled passages to a chunk as
  text extracted from a PDF: wrapped at 80 columns, a page every ``PAGE_LINES`` lines, each
  under a running head and over a running foot with its number, so a sentence may go on
  past a page's foot and the next page's head; a page never ends inside an answer), and
  ``mail4`` (four titled passages to a chunk as an e-mail thread: each passage a message's
  quoted text, wrapped behind ``> ``, under the message's headers, its subject the passage's
  title, and a line of reply: ``mail_data``), ``subtitles4`` (four titled passages to a
  chunk as caption files, SRT and WebVTT in turn: lines of 42 characters, two to a timed cue,
  a sentence going on from cue to cue) and ``meeting4`` (the same as meeting transcripts in
  WebVTT: a line a cue, its speaker's name before it: ``caption_data``), and
  ``markdown_sections`` (the passages as one Markdown file under their titles, cut by
  LangChain's Markdown header splitter, which moves each title into its section's metadata,
  then into 500-character pieces: ``shapes_data.markdown_sections``);
- **the NQ items as other retrievers and users send them** (``variant_data``: ``VARIANTS``):
  a top-100 of passages, every chunk twice, a loader's source line atop each chunk, the
  question as search-box keywords, the question with typos;
- **the NQ passages as a search returned them** (``search_data``): in a tool message
  (``SEARCH``) or as JSON document lists among the request's documents (``LISTED``);
- **the NQ passages written into the user's message** by a prompt template, with no documents
  (``inline_data``: ``INLINE``);
- **the NQ passages asked for as a whole** (``ASKED``): ``whole_asks4``, four titled passages to
  a chunk and, in the user's turn, one of ``WHOLE_ASKS`` (a summary, a translation, what they
  are about, every person in them, their key points; one in Chinese) in place of the question.
"""

from __future__ import annotations

import functools
import json
import random
import re
import textwrap
from collections.abc import Callable
from html import escape

from caption_data import meetings, subtitles
from config_data import INDENTED
from inline_data import INLINE
from mail_data import threads
from search_data import LISTED, SEARCH
from shapes_data import (
    WRAP_COLUMNS,
    markdown_sections,
    placed_pieces,
    resplit,
    small_splitters,
    splits_answer,
)
from variant_data import VARIANTS

from promptslim.bench.datasets import BenchItem
from promptslim.bench.file_datasets import NQ_INSTRUCTION, qa_request
from promptslim.types import Document, Message

__all__ = [
    "ASKED", "FOOTER", "GENERATED", "LISTED", "NAV", "PROSE", "SEARCH", "TEMPLATE", "WHOLE_ASKS",
    "build", "html_pages",
]  # fmt: skip

#: documents in each generated item, and records in each document
DOCUMENTS = 5
RECORDS = 40

#: the template of ``template_other4`` (``{q}``: the question), unlike any in shapes_data
TEMPLATE = (
    "Read the documents below carefully.\nQuestion: {q}?\nAnswer in one sentence and cite the"
    " document id. If unsure, say so."
)


def _item(name: str, i: int, texts: list[str], question: str, *answers: str) -> BenchItem:
    docs = [Document(id=f"{name}-{d}", text=t) for d, t in enumerate(texts)]
    return BenchItem(f"{name}-{i}", qa_request(NQ_INSTRUCTION, question, docs), answers)


def tables(rng: random.Random, i: int) -> BenchItem:
    """Markdown tables of hosts; the question names one host by its id."""
    host, ip = f"db-{4000 + i}", f"10.9.{i % 256}.77"
    where = (rng.randrange(DOCUMENTS), rng.randrange(RECORDS))
    texts = []
    for d in range(DOCUMENTS):
        lines = [f"## Inventory batch {d}", "", "| host | region | ip | owner | ram_gb |"]
        lines.append("|---|---|---|---|---|")
        for k in range(RECORDS):
            name = f"{rng.choice(['db', 'web', 'cache', 'queue'])}-{rng.randint(10, 999)}"
            addr = f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
            if (d, k) == where:
                name, addr = host, ip
            region = rng.choice(["us-east-1", "eu-west-2", "ap-south-1"])
            lines.append(f"| {name} | {region} | {addr} | team-{rng.randint(1, 20)} | 32 |")
        texts.append("\n".join(lines))
    return _item("tables", i, texts, f"What is the IP address of host {host}?", ip)


def logs(rng: random.Random, i: int) -> BenchItem:
    """Service logs; the question asks why one order's charge failed."""
    order = f"88{i:04d}"
    where = (rng.randrange(DOCUMENTS), rng.randrange(2 * RECORDS))
    texts = []
    for d in range(DOCUMENTS):
        lines = []
        for k in range(2 * RECORDS):
            ts = f"2026-11-0{d + 1}T1{k // 60}:{k % 60:02d}:{rng.randint(10, 59)}Z"
            if (d, k) == where:
                lines.append(f"{ts} ERROR payment-svc order={order} charge failed: card declined")
                continue
            svc = rng.choice(["payment-svc", "auth-svc", "cart-svc"])
            took = rng.randint(3, 900)
            lines.append(f"{ts} INFO {svc} order={rng.randint(10000, 99999)} handled in {took}ms")
        texts.append("\n".join(lines))
    return _item("logs", i, texts, f"Why did the charge for order {order} fail?", "card declined")


def code(rng: random.Random, i: int) -> BenchItem:
    """Python modules of look-alike functions; the question asks one function's timeout."""
    verbs, nouns = ["load", "parse", "sync", "flush", "render"], ["user", "order", "cache", "index"]
    per = RECORDS // 4
    names = [f"{rng.choice(verbs)}_{rng.choice(nouns)}_{k}" for k in range(DOCUMENTS * per)]
    timeouts = rng.sample(range(1000, 10_000), len(names))  # distinct: one line answers
    target = rng.randrange(len(names))
    texts = []
    for d in range(DOCUMENTS):
        lines = [f"# module service_{d}.py", "import os", ""]
        for k in range(d * per, (d + 1) * per):
            verb, noun, _ = names[k].split("_")
            lines += [
                f"def {names[k]}(client, retries=3):",
                f'    """{verb.title()} the {noun} records from the backend."""',
                f"    timeout_ms = {timeouts[k]}",
                f"    return client.call({names[k]!r}, timeout=timeout_ms, retries=retries)",
                "",
            ]
        texts.append("\n".join(lines))
    question = f"What timeout does {names[target]} use?"
    return _item("code", i, texts, question, f"timeout_ms = {timeouts[target]}")


def records(rng: random.Random, i: int) -> BenchItem:
    """JSON exports of accounts; the question asks one named account's seats."""
    where = (rng.randrange(DOCUMENTS), rng.randrange(RECORDS))
    first, last = ["Ana", "Bo", "Chen", "Dee", "Eli"], ["Smith", "Lee", "Khan", "Ortiz"]
    seats = 340 + i
    texts = []
    for d in range(DOCUMENTS):
        rows = []
        for k in range(RECORDS):
            name = f"{rng.choice(first)} {rng.choice(last)}"
            row = {"id": f"u{rng.randint(1000, 9999)}", "name": name, "seats": rng.randint(1, 50)}
            if (d, k) == where:
                row = {"id": "u7311", "name": "Marguerite Okafor", "seats": seats}
            rows.append(row)
        texts.append(json.dumps(rows, indent=2))
    question = "How many seats does Marguerite Okafor's account have?"
    # the member as json.dumps writes it, and as a compact writer (a cut export) does
    return _item("records", i, texts, question, f'"seats": {seats}', f'"seats":{seats}')


#: the generated shapes by name
GENERATED: dict[str, Callable[[random.Random, int], BenchItem]] = {
    "tables": tables,
    "logs": logs,
    "code": code,
    "records": records,
}


def _paragraph(d: Document, titled: bool) -> str:
    return f"{d.title}\n{d.text}" if titled and d.title else d.text


def _with(item: BenchItem, texts: list[str]) -> BenchItem:
    docs = [Document(id=f"chunk-{c}", text=t) for c, t in enumerate(texts)]
    return BenchItem(item.id, item.request.replace(documents=docs), item.answers, item.metadata)


def long_document(item: BenchItem, rng: random.Random) -> BenchItem:
    docs = list(item.request.documents)
    rng.shuffle(docs)
    return _with(item, ["\n\n".join(f"## {d.title}\n\n{d.text}" for d in docs)])


def _chunks(item: BenchItem, titled: bool, k: int = 4) -> list[str]:
    docs = list(item.request.documents)
    groups = [docs[c : c + k] for c in range(0, len(docs), k)]
    return ["\n\n".join(_paragraph(d, titled) for d in group) for group in groups]


def untitled(item: BenchItem, rng: random.Random) -> BenchItem:
    return _with(item, _chunks(item, titled=False))


def template_other(item: BenchItem, rng: random.Random) -> BenchItem:
    chunked = _with(item, _chunks(item, titled=True))
    question = item.request.query or ""
    asked = Message(role="user", content=TEMPLATE.format(q=question))
    messages = [*chunked.request.messages[:-1], asked]
    request = chunked.request.replace(query=None, messages=messages)
    return BenchItem(item.id, request, item.answers, item.metadata)


#: asks for the documents as a whole, one an item in turn (``whole_asks4``)
WHOLE_ASKS = (
    "Summarize the documents above.",
    "Translate the passages into French.",
    "What are these documents about?",
    "List every person mentioned in the documents.",
    "Give me the key points of the context in five bullets.",
    "请总结以上文档的要点。",
)


def whole_asks(item: BenchItem, rng: random.Random) -> BenchItem:
    """Four titled passages to a chunk, the user asking for them as a whole (a summary, a
    translation, every person in them), in turn, with no ``Request.query``."""
    chunked = _with(item, _chunks(item, titled=True))
    ask = WHOLE_ASKS[sum(map(ord, str(item.id))) % len(WHOLE_ASKS)]
    messages = [*chunked.request.messages[:-1], Message(role="user", content=ask)]
    request = chunked.request.replace(query=None, messages=messages)
    return BenchItem(item.id, request, item.answers, item.metadata)


#: the NQ passages asked for as a whole, by name
ASKED: dict[str, Callable[[BenchItem, random.Random], BenchItem]] = {"whole_asks4": whole_asks}


#: a scraped page's boilerplate around its content, in every chunk a loader cuts from it
NAV = (
    '<nav class="site-nav"><a href="/">Home</a> | <a href="/topics">Topics</a> | '
    '<a href="/search">Search</a></nav>'
)
FOOTER = "<footer><p>Text is available under CC BY-SA 4.0 unless otherwise noted.</p></footer>"


def _section(d: Document) -> str:
    title = d.title or ""
    slug = re.sub(r"\W+", "-", title.lower()).strip("-")
    return (
        f'<section id="{slug}">\n<h2>{escape(title, quote=False)}</h2>\n'
        f"<p>{escape(d.text, quote=False)}</p>\n</section>"
    )


def html_pages(item: BenchItem, rng: random.Random, k: int = 4) -> BenchItem:
    docs = list(item.request.documents)
    pages = [
        "\n".join([NAV, "<main>", *(_section(d) for d in docs[c : c + k]), "</main>", FOOTER])
        for c in range(0, len(docs), k)
    ]
    relaid = _with(item, pages)
    # "AT&T" is on the page as "AT&amp;T": the same answer, as the page writes it
    answers = tuple(dict.fromkeys([*item.answers, *(escape(a, quote=False) for a in item.answers)]))
    return BenchItem(relaid.id, relaid.request, answers, relaid.metadata)


@functools.cache
def _small_splitters() -> dict[str, Callable[[str], list[str]]]:
    return small_splitters()  # built once: the token splitter loads its encoding


def langchain500(item: BenchItem, rng: random.Random) -> BenchItem:
    return resplit(item, _small_splitters()["langchain500"])


def langchain500_placed(item: BenchItem, rng: random.Random) -> BenchItem:
    return placed_pieces(item)


def tokens256(item: BenchItem, rng: random.Random) -> BenchItem:
    return resplit(item, _small_splitters()["tokens256"])


#: what speech-to-text leaves out: punctuation (an apostrophe stays, inside a word)
_UNSPOKEN = re.compile(r"[^\w\s']")


def spoken(text: str) -> str:
    """``text`` as a transcript: lower case, punctuation removed, one line."""
    return " ".join(_UNSPOKEN.sub("", text).lower().split())


def transcript(item: BenchItem, rng: random.Random) -> BenchItem:
    return _with(item, [spoken(chunk) for chunk in _chunks(item, titled=True)])


#: the lines of a page of ``pages4``, and its running head (a foot is its page's number)
PAGE_LINES = 20
RUNNING_HEAD = "REFERENCE HANDBOOK"


def _paged(text: str, first_page: int, answers: tuple[str, ...]) -> str:
    """``text`` wrapped, its titles lines of their own, in pages under ``RUNNING_HEAD`` and
    over ``Page N``: a page ends after ``PAGE_LINES`` lines, or later where the break would
    part an answer's words."""
    lines = [
        wrapped
        for paragraph in text.split("\n\n")
        for line in paragraph.split("\n")
        for wrapped in textwrap.wrap(
            line, WRAP_COLUMNS, break_long_words=False, break_on_hyphens=False
        )
    ]
    out, page, on_page = [RUNNING_HEAD], first_page, 0
    for i, line in enumerate(lines):
        out.append(line)
        on_page += 1
        after = lines[i + 1] if i + 1 < len(lines) else None
        if after is not None and on_page >= PAGE_LINES and not splits_answer(line, after, answers):
            out += [f"Page {page}", "", RUNNING_HEAD]
            page, on_page = page + 1, 0
    return "\n".join([*out, f"Page {page}"])


def pages(item: BenchItem, rng: random.Random) -> BenchItem:
    texts: list[str] = []
    for chunk in _chunks(item, titled=True):  # the pages numbered on from chunk to chunk
        texts.append(_paged(chunk, 1 + sum(t.count("\n\n") + 1 for t in texts), item.answers))
    return _with(item, texts)


def mail(item: BenchItem, rng: random.Random) -> BenchItem:
    return _with(item, threads(item))


def sections(item: BenchItem, rng: random.Random) -> BenchItem:
    return markdown_sections(item)


def captions(item: BenchItem, rng: random.Random) -> BenchItem:
    return _with(item, subtitles(item))


def meeting(item: BenchItem, rng: random.Random) -> BenchItem:
    return _with(item, meetings(item))


#: the NQ shapes by name
PROSE: dict[str, Callable[[BenchItem, random.Random], BenchItem]] = {
    "long_document": long_document,
    "untitled4": untitled,
    "template_other4": template_other,
    "html4": html_pages,
    "langchain500": langchain500,
    "langchain500_placed": langchain500_placed,
    "tokens256": tokens256,
    "transcript4": transcript,
    "pages4": pages,
    "mail4": mail,
    "subtitles4": captions,
    "meeting4": meeting,
    "markdown_sections": sections,
}


def build(nq: list[BenchItem], n: int, seed: int = 0) -> dict[str, list[BenchItem]]:
    """Every shape: ``n`` generated items each, and the NQ shapes of ``nq``; the same ``seed``,
    the same items."""
    rng = random.Random(seed)
    shapes = {name: [make(rng, i) for i in range(n)] for name, make in GENERATED.items()}
    for name, relay in (PROSE | SEARCH | LISTED | ASKED | INLINE).items():
        shapes[name] = [relay(item, rng) for item in nq]
    for name, vary in VARIANTS.items():  # last: the shapes above draw what they always drew
        shapes[name] = [vary(nq, i, rng) for i in range(len(nq))]
    for name, make in INDENTED.items():  # after the others, for the same reason
        shapes[name] = [make(rng, i) for i in range(n)]
    return shapes
