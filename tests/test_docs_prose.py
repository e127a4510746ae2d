"""``_prose``: a description keeps its Markdown, but nothing in it opens a block past its section."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from agentfx.docs import _prose  # pyright: ignore[reportPrivateUsage]

if TYPE_CHECKING:
    from markdown_it.token import Token


def _parse(markdown: str) -> list[Token]:
    # As tests/test_docs.py parses a generated document: CommonMark with GFM tables.
    return MarkdownIt("commonmark").enable("table").parse(markdown)


def _fences(markdown: str) -> list[str]:
    """The content of every fenced code block ``markdown`` renders, at any depth."""
    return [t.content for t in _parse(markdown) if t.type == "fence"]


def _inserted_backslash(original: str, escaped: str) -> bool:
    """Whether ``escaped`` is ``original`` with one backslash inserted."""
    return len(escaped) == len(original) + 1 and any(
        escaped[k] == "\\" and escaped[:k] + escaped[k + 1 :] == original for k in range(len(escaped))
    )


# A fence closed by a line in its own container stays a code block as written,
# whatever the container: each case renders exactly one fence, of ``# code``.
_KEPT_FENCES = {
    "list-item": "- item\n\n  ```\n  # code\n  ```",
    "list-item-first-line": "- ```\n  # code\n  ```",
    "ordered-item": "1. item\n\n   ~~~ text\n   # code\n   ~~~",
    "nested-item": "- item\n  - nested\n\n    ```\n    # code\n    ```",
    "blockquote": "> ```\n> # code\n> ```",
    "blockquote-in-item": "- > ```\n  > # code\n  > ```",
    "item-in-blockquote": "> - ```\n>   # code\n>   ```",
    "indented-one": " ```\n # code\n ```",
    "indented-three": "   ```\n   # code\n   ```",
    "closing-indented-otherwise": "  ```\n# code\n   ```",
    "blank-line-inside-item": "- ```\n  # code\n\n  ```",
    "tab-indented-item": "-\t```\n\t# code\n\t```",
    "item-opened-empty": "-\n  ```\n  # code\n\n  ```",
}


@pytest.mark.parametrize("description", _KEPT_FENCES.values(), ids=_KEPT_FENCES.keys())
def test_a_fence_closed_in_its_own_container_is_kept(description: str) -> None:
    assert _prose(description) == description
    assert [content.strip("\n") for content in _fences(description)] == ["# code"]


# A fence its own container does not close is escaped, even where a line past
# that container would close it, and so is what it held that opens a block.
_UNCLOSED_FENCES = {
    "list-item-closed-outside": ("- item\n\n  ```\n  # code\n```", "- item\n\n  \\```\n  \\# code\n\\```"),
    "blockquote-closed-outside": ("> ```\n> # code\n```", "> \\```\n> \\# code\n\\```"),
    "blockquote-ended-by-blank": ("> ```\n> a\n\n> ```", "> \\```\n> a\n\n> \\```"),
    "nested-blockquote": ("> ```\n> > ```", "> \\```\n> > \\```"),
    "item-ends-first": ("- ```\n  code\nnot in the item\n  ```", "- \\```\n  code\nnot in the item\n  \\```"),
    "indented-unclosed": ("  ```\n  # code", "  \\```\n  \\# code"),
    "shorter-closing": ("````\ncode\n```", "\\````\ncode\n\\```"),
    "closing-as-code": ("```\ncode\n    ```", "\\```\ncode\n    ```"),
}


@pytest.mark.parametrize(("description", "escaped"), _UNCLOSED_FENCES.values(), ids=_UNCLOSED_FENCES.keys())
def test_a_fence_its_own_container_does_not_close_is_escaped(description: str, escaped: str) -> None:
    assert _prose(description) == escaped
    assert _fences(escaped) == []


# An HTML start is escaped exactly where CommonMark opens an HTML block there.
_HTML_LINES = {
    "email-autolink": ("<someone@example.com> wrote this", "<someone@example.com> wrote this"),
    "short-email-autolink": ("<a@b.co>", "<a@b.co>"),
    "uri-autolink": ("<https://example.com> has it", "<https://example.com> has it"),
    "inline-tag-then-text": ("<em>x</em> is emphasis", "<em>x</em> is emphasis"),
    "inline-tag-in-item": ("- <em>x</em> too", "- <em>x</em> too"),
    "lone-tag-continuing-a-paragraph": ("Create a todo\n<span>", "Create a todo\n<span>"),
    "lone-tag-continuing-a-quote-lazily": ("> Create a todo\n<span>", "> Create a todo\n<span>"),
    "lone-tag-opening": ("<span>\nCreate a todo", "\\<span>\nCreate a todo"),
    "lone-tag-after-blank": ("Create a todo\n\n<a href='x'>", "Create a todo\n\n\\<a href='x'>"),
    "lone-closing-tag-opening": ("</span>", "\\</span>"),
    "lone-tag-in-a-new-item": ("Create a todo\n- <span>", "Create a todo\n- \\<span>"),
    "lone-tag-in-a-blockquote": ("> <span>", "> \\<span>"),
    "block-tag-interrupting": ("Create a todo\n<div>", "Create a todo\n\\<div>"),
    "block-tag-with-text": ("<DIV class='x'>text", "\\<DIV class='x'>text"),
    "closing-block-tag": ("Create a todo\n</p>", "Create a todo\n\\</p>"),
    "pre-interrupting": ("Create a todo\n<pre>x</pre>", "Create a todo\n\\<pre>x</pre>"),
    "textarea": ("<textarea", "\\<textarea"),
    "comment": ("<!-- note -->", "\\<!-- note -->"),
    "processing-instruction": ("<?php", "\\<?php"),
    "declaration": ("<!DOCTYPE html>", "\\<!DOCTYPE html>"),
    "cdata": ("<![CDATA[ x", "\\<![CDATA[ x"),
    "not-a-block-tag": ("<divx> and text", "<divx> and text"),
}


@pytest.mark.parametrize(("description", "escaped"), _HTML_LINES.values(), ids=_HTML_LINES.keys())
def test_an_html_start_is_escaped_only_where_it_opens_a_block(description: str, escaped: str) -> None:
    assert _prose(description) == escaped
    assert not [t for t in _parse(escaped) if t.type == "html_block"]


def test_an_email_autolink_stays_a_link() -> None:
    tokens = _parse(_prose("<someone@example.com> wrote this"))
    links = [c for t in tokens for c in t.children or [] if c.type == "link_open"]
    assert [link.attrs["href"] for link in links] == ["mailto:someone@example.com"]


# A thematic break, spaced or not, with spaces or tabs, in any container.
_BREAKS = {
    "stars": ("* * *", "\\* * *"),
    "dashes": ("- - -", "\\- - -"),
    "underscores": ("_ _ _", "\\_ _ _"),
    "tabs": ("*\t*\t*", "\\*\t*\t*"),
    "trailing-space": ("_  _  _  ", "\\_  _  _  "),
    "indented": ("   - - -", "   \\- - -"),
    "after-a-paragraph": ("Create a todo\n* * *", "Create a todo\n\\* * *"),
    "in-an-item": ("- * * *", "- \\* * *"),
    "in-an-ordered-item": ("1. _ _ _", "1. \\_ _ _"),
    "continuing-an-item": ("- item\n\n  - - -", "- item\n\n  \\- - -"),
    "in-a-blockquote": ("> - - -", "> \\- - -"),
    "in-a-blockquote-with-a-tab": (">\t*\t*\t*", ">\t\\*\t*\t*"),
    "in-an-item-in-a-blockquote": ("> * _ _ _", "> * \\_ _ _"),
}


@pytest.mark.parametrize(("description", "escaped"), _BREAKS.values(), ids=_BREAKS.keys())
def test_a_thematic_break_is_escaped(description: str, escaped: str) -> None:
    assert _prose(description) == escaped
    assert not [t for t in _parse(escaped) if t.type in {"hr", "heading_open"}]


# A line of only ``=`` or ``-`` is a setext underline only right below a
# paragraph in the paragraph's own container; elsewhere it is text, or an
# empty list item, and stays as written.
_UNDERLINES = {
    "dash": ("Create a todo\n-", "Create a todo\n\\-"),
    "equals": ("Create a todo\n  ==", "Create a todo\n  \\=="),
    "in-an-item": ("- an item\n  =", "- an item\n  \\="),
    "in-a-blockquote": ("> a quote\n> --", "> a quote\n> \\--"),
    "empty-item-opening": ("-\n  an item", "-\n  an item"),
    "equals-opening": ("===\nno heading", "===\nno heading"),
    "empty-item-after-a-quote": ("> a quote\n-", "> a quote\n-"),
    "empty-item-after-an-item": ("- an item\n-", "- an item\n-"),
}


@pytest.mark.parametrize(("description", "escaped"), _UNDERLINES.values(), ids=_UNDERLINES.keys())
def test_a_setext_underline_is_escaped_below_a_paragraph(description: str, escaped: str) -> None:
    assert _prose(description) == escaped
    assert not [t for t in _parse(escaped) if t.type in {"hr", "heading_open"}]


# Where markdown-it reads the containers otherwise than CommonMark, a block
# start either reads is escaped.
_MARKDOWN_IT_READINGS = {
    # markdown-it continues a blockquote at a ``>`` indented as code.
    "blockquote-marker-past-code": ("> a quote\n    > # heading", "> a quote\n    > \\# heading"),
    # CommonMark reads code from the first such line on; markdown-it, the blockquote still.
    "blockquote-held-past-code": (
        "> a quote\n>\n    > ## one\n    > ## two",
        "> a quote\n>\n    > \\## one\n    > \\## two",
    ),
    # It ends the nested item's paragraph at ``-``, which CommonMark reads as
    # text continuing it, so the ``=`` below ``#`` is an underline to it.
    "paragraph-ended-past-an-item": ("1.    - #\n    - \n#\n=", "1.    - \\#\n    - \n\\#\n\\="),
    # It ends the inner blockquote at ``#``, and with it the outer one.
    "paragraph-ended-past-a-quote": ("> > #\n     #\n<a href='x'>", "> > \\#\n     #\n\\<a href='x'>"),
    # Past a blockquote continued at a ``>`` indented as code, it continues the list
    # item open in that blockquote too, so ``#`` is three columns past its content.
    "item-held-past-code": (">1. a\n    >       # x", ">1. a\n    >       \\# x"),
    "item-held-past-code-after-a-blank": ("> - a\n>\n    >     # x", "> - a\n>\n    >     \\# x"),
    # It measures a tab past a nested blockquote's marker from the inner blockquote's
    # place in the outer one: the tab is one column wide there, so ``#`` starts the
    # item's content (a heading), where CommonMark reads code.
    "tab-past-a-nested-quote": (">>* \t# Context", ">>* \t\\# Context"),
    "tab-past-a-third-quote": (">>> \t---", ">>> \t\\---"),
    # The item's content starts there at another column, so a later line CommonMark
    # reads as its paragraph's continuation starts a block to markdown-it.
    "tab-past-a-nested-quote-then-a-line": (">>* \tx\n>>       # y", ">>* \tx\n>>       \\# y"),
    "numbered-tab-past-a-nested-quote-then-a-line": (">>1.\tx\n>>     <!-- c", ">>1.\tx\n>>     \\<!-- c"),
}


@pytest.mark.parametrize(("description", "escaped"), _MARKDOWN_IT_READINGS.values(), ids=_MARKDOWN_IT_READINGS.keys())
def test_a_block_start_markdown_it_reads_is_escaped(description: str, escaped: str) -> None:
    assert _prose(description) == escaped
    tokens = _parse("## first\n\n" + escaped + "\n\n## last\n")
    assert [t.tag for t in tokens if t.type == "heading_open"] == ["h2", "h2"]
    assert not [t for t in tokens if t.type in {"hr", "html_block"}]


# Lines built of Markdown-significant fragments, so that containers, fences,
# HTML, headings and breaks meet each other at every depth.
_FRAGMENTS = (
    "#", "##", "```", "~~~", ">", "- ", "1. ", "* * *", "---", "===", "<!--", "<div>", "<a@b.co>",
    "<em>x</em>", " ", "  ", "   ", "\t", "word", "text",
)  # fmt: skip
_LINES = st.lists(st.sampled_from(_FRAGMENTS), max_size=6).map("".join)
_DESCRIPTIONS = st.lists(_LINES, max_size=8).map("\n".join)


@settings(max_examples=200, deadline=None)
@given(_DESCRIPTIONS)
def test_no_description_forges_or_swallows_the_document(description: str) -> None:
    tokens = _parse("## first\n\n" + _prose(description) + "\n\n## last\n\nend\n")
    top = [k for k, t in enumerate(tokens) if t.type == "heading_open" and t.level == 0]
    assert [(tokens[k].tag, tokens[k + 1].content) for k in top] == [("h2", "first"), ("h2", "last")]
    first, last = top
    # Nothing between the two headings is a heading, nor a break or an HTML
    # block, at the top level or inside the description's own containers.
    assert not [t.type for t in tokens[first + 3 : last] if t.type in {"heading_open", "hr", "html_block"}]
    assert [t.type for t in tokens[last + 3 :]] == ["paragraph_open", "inline", "paragraph_close"]
    assert tokens[last + 4].content == "end"


_WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)
_PLAIN = st.lists(st.lists(_WORDS, max_size=6).map(" ".join), max_size=8).map("\n".join)


@settings(max_examples=200, deadline=None)
@given(_PLAIN)
def test_plain_words_come_back_unchanged(description: str) -> None:
    assert _prose(description) == description


@settings(max_examples=200, deadline=None)
@given(_DESCRIPTIONS)
def test_an_escaped_line_differs_only_by_one_inserted_backslash(description: str) -> None:
    lines = _prose(description).split("\n")
    assert len(lines) == len(description.split("\n"))
    for original, escaped in zip(description.split("\n"), lines, strict=True):
        assert escaped == original or _inserted_backslash(original, escaped)
