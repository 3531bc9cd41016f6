#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that every relative link of markdown files resolves, so that the
docs cannot point at a page, file or section that is not there.  Usage:
  tests/doc_links.py [FILE.md...]   (default: README.md and docs/*.md)

For each inline link or image, [text](dest) and ![alt](dest), and each
reference definition, [label]: dest, outside code blocks and code spans:
  - a dest with a scheme (https:, mailto:, ...) is left alone;
  - an absolute path (/x) is an error: it does not resolve in a checkout;
  - a relative path must name a file or directory, from the markdown
    file's own directory;
  - an #anchor (alone: in the same file) must be a heading of the target,
    which must be markdown, spelled as GitHub spells it: lower case,
    punctuation other than - and _ dropped, blanks made -, "-1", "-2", ...
    after a repeated heading; or an <a name="..."> or id="..." in it.
Prints one line per broken link (FILE:LINE: ...) and exits 1 when any
is broken, 2 on bad usage.
"""
import os
import re
import sys

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:name|id)\s*=\s*\"([^\"]+)\"", re.I)
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*(<[^>]*>|\S+)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def strip_code_spans(line):
    """The line with every code span blanked (same length, so columns hold)."""
    out, i = [], 0
    while i < len(line):
        if line[i] == "`":
            n = len(line[i:]) - len(line[i:].lstrip("`"))
            ticks = line[i:i + n]
            end = line.find(ticks, i + n)
            while end >= 0 and end + n < len(line) and line[end + n] == "`":
                end = line.find(ticks, end + n + 1)
            if end < 0:
                out.append(ticks)
                i += n
                continue
            out.append(" " * (end + n - i))
            i = end + n
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


def inline_links(text):
    """The dest of every [text](dest) and ![alt](dest) in text (code spans
    already blanked); brackets may nest, dest may be <...> or carry a
    "title"."""
    dests = []
    i = 0
    while True:
        i = text.find("](", i)
        if i < 0:
            return dests
        # The [ that opens this link text, minding nested brackets.
        depth, j = 0, i - 1
        while j >= 0:
            if text[j] == "]":
                depth += 1
            elif text[j] == "[":
                if depth == 0:
                    break
                depth -= 1
            j -= 1
        k = i + 2
        if j < 0:
            i = k
            continue
        if k < len(text) and text[k] == "<":
            end = text.find(">", k)
            if end < 0:
                i = k
                continue
            dests.append(text[k + 1:end])
            i = end + 1
            continue
        depth, end = 0, k
        while end < len(text) and not text[end].isspace():
            if text[end] == "(":
                depth += 1
            elif text[end] == ")":
                if depth == 0:
                    break
                depth -= 1
            end += 1
        dests.append(text[k:end])
        i = end


def slug(heading):
    """GitHub's anchor of a heading's text (github-slugger)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)   # links: their text
    text = re.sub(r"<[^>]+>", "", text)                         # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def scan(path):
    """(links, anchors): links as (line, dest), anchors as a set."""
    links, anchors, seen = [], set(), {}
    fence = None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = FENCE.match(line)
            if fence:
                if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                        and not line.strip()[len(m.group(1)):].strip():
                    fence = None
                continue
            if m:
                fence = m.group(1)
                continue
            if line.startswith("    ") or line.startswith("\t"):
                continue            # an indented code block (or a list's continuation)
            for a in HTML_ANCHOR.findall(line):
                anchors.add(a)
            h = HEADING.match(line)
            if h:
                s = slug(h.group(2))
                k = seen.get(s, 0)
                seen[s] = k + 1
                anchors.add(s if k == 0 else f"{s}-{k}")
            text = strip_code_spans(line)
            r = REF_DEF.match(text)
            if r:
                links.append((n, r.group(1).strip("<>")))
                continue
            links.extend((n, d) for d in inline_links(text))
    return links, anchors


def main(argv):
    if any(a.startswith("-") for a in argv):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if not argv:
        top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        docs = os.path.join(top, "docs")
        argv = [os.path.join(top, "README.md")]
        if os.path.isdir(docs):
            argv += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    cache, broken, count = {}, 0, 0

    def anchors_of(md):
        if md not in cache:
            cache[md] = scan(md)
        return cache[md][1]

    for md in argv:
        if not os.path.isfile(md):
            print(f"doc_links: {md}: no such file", file=sys.stderr)
            return 2
        links, _ = cache.setdefault(os.path.abspath(md), scan(md))
        for line, dest in links:
            count += 1
            where = f"{os.path.relpath(md)}:{line}: link '{dest}'"
            if not dest or SCHEME.match(dest):
                continue
            target, _, anchor = dest.partition("#")
            if target.startswith("/"):
                print(f"{where}: an absolute path, which does not resolve in a checkout")
                broken += 1
                continue
            full = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(md)),
                                                 target)) if target else os.path.abspath(md)
            if not os.path.exists(full):
                print(f"{where}: {os.path.relpath(full)} does not exist")
                broken += 1
                continue
            if not anchor:
                continue
            if not full.endswith(".md") or not os.path.isfile(full):
                print(f"{where}: an anchor into {os.path.relpath(full)}, which is not markdown")
                broken += 1
                continue
            have = anchors_of(full)
            if anchor not in have:
                near = sorted(a for a in have if a[:4] == anchor[:4]) or sorted(have)[:8]
                print(f"{where}: {os.path.relpath(full)} has no heading #{anchor}"
                      f" (it has: {', '.join('#' + a for a in near)})")
                broken += 1
    if broken:
        print(f"doc_links: {broken} of {count} links broken", file=sys.stderr)
        return 1
    print(f"doc_links: {count} links in {len(argv)} files resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
