#!/usr/bin/env python3
"""OVERVIEW: Compiles the documentation's examples: writes every ```swift block of README.md and docs/*.md
into Tests/DocumentationExamples/Generated/, one XCTest test per block, so `swift test` builds and
runs each one (DocumentationExamplesTests checks that the generated files match the docs).

USAGE: Tools/extract-examples.py [--check]

OPTIONS:
  --check     write nothing; exit 1 naming each document whose examples changed since the
              generated files were written (what the test suite runs)
  -h, --help  show this help

CONVENTION (for whoever writes a doc):
  Each ```swift block is the body of a test of its own (class <Document>Examples, method
  test<Heading>, a number after it when a section has several blocks), run on a fresh store in a
  temporary directory. These names are in scope when the block uses them and does not declare them
  itself (Tests/DocumentationExamples/Example.swift):
      path    a store directory made for the example (an empty store, closed)
      store   the store at `path`, open with the default options
      draft   a `Draft` (title, body), a Codable model
      show    show(value): stands for an app's user interface
  `import` lines are dropped; `struct`, `enum`, `class`, `actor`, `protocol`, `extension` and
  `typealias` declarations starting in column 0 go to file scope, shared by every example of the
  docs (so two documents must not declare the same type). `…` stands for code the reader fills in
  and compiles as nothing. Compile errors and failed checks name the document's own line.
  Markers, HTML comments that a rendered page does not show, just before a block (or just after
  it, for a check):
      <!-- example: skip (why it cannot run) -->   not compiled; say why; keep these rare
      <!-- example: continues -->                  the block goes on in the previous block's test
                                                   (same section): one scope, one store
      <!-- example: setup CODE -->                 Swift run before the block, e.g. values the
                                                   block reads, or `example.afterObserving(store)
                                                   { try store.put(…) }`, which ends a `for await`
                                                   loop over a change stream after that write
      <!-- example: check CODE -->                 after the block: Swift run after it, typically
                                                   XCTAssertEqual of what the doc says it gives
  CODE may span lines up to the closing -->.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join("Tests", "DocumentationExamples", "Generated")

# The names Example.swift provides: (name, the Swift line that declares it in a test).
SCOPE = [
    ("path", "let path = example.path"),
    ("store", "let store = try example.openStore()"),
    ("draft", "let draft = example.draft"),
]

DECLARATION = re.compile(r"^(?:public |final )*(?:struct|enum|class|actor|protocol|extension|typealias)\b")
MARKER_START = re.compile(r"^\s*<!--\s*example:\s*(\w+)(.*)$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


class DocError(Exception):
    pass


def documents():
    names = ["README.md"] if os.path.exists(os.path.join(ROOT, "README.md")) else []
    docs = os.path.join(ROOT, "docs")
    if os.path.isdir(docs):
        names += sorted("docs/" + name for name in os.listdir(docs) if name.endswith(".md"))
    return names


class Block:
    def __init__(self, doc, heading, line, code):
        self.doc, self.heading, self.line, self.code = doc, heading, line, code
        self.skip = None
        self.continues = False
        self.setup = []   # [(first line, [code lines])]
        self.checks = []


def read_marker(lines, index, doc):
    """The marker starting at lines[index]: (kind, first code line number, code lines, next index)."""
    match = MARKER_START.match(lines[index])
    kind, rest = match.group(1), match.group(2)
    text, first, end = [], index + 1, index
    while True:
        piece = rest if end == index else lines[end]
        if "-->" in piece:
            text.append(piece[: piece.index("-->")])
            break
        text.append(piece)
        end += 1
        if end == len(lines):
            raise DocError(f"{doc}:{index + 1}: the example marker is never closed with -->")
    if kind not in ("skip", "continues", "setup", "check"):
        raise DocError(f"{doc}:{index + 1}: unknown example marker '{kind}' (skip, continues, setup or check)")
    # Code written on the marker's own line starts on that line; otherwise on the next.
    if text[0].strip():
        first = index + 1
        text[0] = text[0].lstrip()
    else:
        text, first = text[1:], index + 2
    text = [piece.rstrip() for piece in text]
    while text and not text[-1]:
        text.pop()
    return kind, first, text, end + 1


def parse(doc):
    lines = open(os.path.join(ROOT, doc), encoding="utf-8").read().split("\n")
    blocks, pending, heading = [], [], None
    index = 0
    while index < len(lines):
        line = lines[index]
        if MARKER_START.match(line):
            marker = index
            kind, first, code, index = read_marker(lines, index, doc)
            if kind == "check":
                if not blocks or blocks[-1].end_index != last_nonblank_before(lines, marker):
                    raise DocError(f"{doc}:{first}: a check marker must come right after a ```swift block")
                blocks[-1].checks.append((first, code))
            else:
                pending.append((kind, first, code, marker + 1))
            continue
        fence = line.strip()
        if fence.startswith("```"):
            language = fence[3:].strip()
            start = index
            index += 1
            while index < len(lines) and lines[index].strip() != "```":
                index += 1
            if index == len(lines):
                raise DocError(f"{doc}:{start + 1}: a code block is never closed")
            if language == "swift":
                if heading is None:
                    raise DocError(f"{doc}:{start + 1}: a ```swift block before the first heading has no name")
                block = Block(doc, heading, start + 2, lines[start + 1 : index])
                block.end_index = index
                for kind, first, code, marker_line in pending:
                    if kind == "skip":
                        reason = " ".join(code).strip()
                        if not (reason.startswith("(") and reason.endswith(")") and len(reason) > 2):
                            raise DocError(f"{doc}:{marker_line}: say why the block is skipped: <!-- example: skip (reason) -->")
                        block.skip = reason[1:-1]
                    elif kind == "continues":
                        block.continues = True
                    else:
                        block.setup.append((first, code))
                blocks.append(block)
            elif pending:
                raise DocError(f"{doc}:{pending[0][3]}: an example marker before a block that is not ```swift")
            pending = []
            index += 1
            continue
        match = HEADING.match(line)
        if match:
            heading = match.group(2)
        if line.strip() and pending:
            raise DocError(f"{doc}:{pending[0][3]}: an example marker must come right before a ```swift block")
        index += 1
    if pending:
        raise DocError(f"{doc}:{pending[0][3]}: an example marker with no ```swift block after it")
    return blocks


def last_nonblank_before(lines, index):
    index -= 1
    while index >= 0 and not lines[index].strip():
        index -= 1
    return index


def camel(text):
    words = re.findall(r"[A-Za-z0-9]+", text)
    return "".join(word[:1].upper() + word[1:] for word in words)


def class_name(doc):
    base = os.path.basename(doc)[: -len(".md")]
    return (base if base.isupper() else camel(base)) + "Examples"


def generated_name(doc):
    return doc.replace("/", "-") + ".swift"


def without_ellipses(line):
    """`…` (code the reader fills in) as a comment, outside line comments."""
    code, sep, comment = line.partition("//")
    return code.replace("…", "/* … */") + sep + comment


def split_block(code):
    """The block's lines as (file-scope declarations, body), each a list of (offset, line)."""
    hoisted, body, index = [], [], 0
    while index < len(code):
        line = code[index]
        if re.match(r"^import\s", line):
            index += 1
            continue
        if DECLARATION.match(line):
            depth = line.count("{") - line.count("}")
            opened = "{" in line or line.lstrip().startswith("typealias")
            group = [(index, line)]
            while depth > 0 or not opened:
                index += 1
                if index == len(code):
                    break
                group.append((index, code[index]))
                opened = opened or "{" in code[index]
                depth += code[index].count("{") - code[index].count("}")
            hoisted.append(group)
            index += 1
            continue
        body.append((index, line))
        index += 1
    return hoisted, body


def location(doc, line):
    return f'#sourceLocation(file: "{doc}", line: {line})'


def emit_lines(out, doc, first, numbered):
    """Lines (offset, text) of the doc starting at `first`, each run of consecutive ones under one
    #sourceLocation so that diagnostics name the doc's own line and column."""
    previous = None
    for offset, text in numbered:
        if previous is None or offset != previous + 1:
            if previous is not None:
                out.append("#sourceLocation()")
            out.append(location(doc, first + offset))
        out.append(without_ellipses(text))
        previous = offset
    if previous is not None:
        out.append("#sourceLocation()")


def declared(name, lines):
    return any(re.match(rf"^\s*(?:let|var)\s+{name}\b", text) for text in lines)


def generate(doc, blocks):
    tests = []  # [name, heading, [blocks]]
    per_heading = {}
    for block in blocks:
        if block.skip is not None:
            continue
        if block.continues:
            if not tests or tests[-1][1] != block.heading:
                raise DocError(f"{doc}:{block.line - 1}: 'continues' needs a compiled block before it in the same section")
            tests[-1][2].append(block)
            continue
        per_heading[block.heading] = per_heading.get(block.heading, 0) + 1
        tests.append([None, block.heading, [block], per_heading[block.heading]])
    names = set()
    for test in tests:
        count = per_heading[test[1]]
        test[0] = "test" + camel(test[1]) + (str(test[3]) if count > 1 else "")
        if test[0] in names:
            raise DocError(f"{doc}: two sections make the test name {test[0]}: give them different headings")
        names.add(test[0])

    out = [
        f"// The ```swift examples of {doc}, as tests. Generated by Tools/extract-examples.py: do not",
        f"// edit; change {doc} and run the script (DocumentationExamplesTests fails until you do).",
        "// Each block runs as the body of a test with the names of Example.swift in scope; the",
        "// #sourceLocation lines make compile errors and failed checks name the document's lines.",
        "// Skipped blocks: " + (", ".join(f"line {b.line - 1} ({b.skip})" for b in blocks if b.skip is not None) or "none") + ".",
        "",
        "import Cask",
        "import Foundation",
        "import XCTest",
        "",
    ]
    for name, heading, group, _ in tests:
        for block in group:
            hoisted, _ = split_block(block.code)
            for declaration in hoisted:
                emit_lines(out, doc, block.line, declaration)
                out.append("")
    out.append(f"final class {class_name(doc)}: XCTestCase {{")
    for position, (name, heading, group, _) in enumerate(tests):
        if position:
            out.append("")
        lines = [f"{doc}:{block.line - 1}" for block in group]
        out.append(f"    /// \"{heading}\": the example at {', '.join(lines)}.")
        out.append(f"    func {name}() async throws {{")
        out.append("        try await Example.run { example in")
        own = [text for block in group for text in block.code]
        own += [text for block in group for _, code in block.setup + block.checks for text in code]
        everything = "\n".join(own)
        for scoped, declaration in SCOPE:
            if re.search(rf"\b{scoped}\b", everything) and not declared(scoped, own):
                out.append("            " + declaration)
        values = []
        for block in group:
            for first, code in block.setup:
                emit_lines(out, doc, first, list(enumerate(code)))
            _, body = split_block(block.code)
            emit_lines(out, doc, block.line, body)
            for first, code in block.checks:
                emit_lines(out, doc, first, list(enumerate(code)))
            values += [m.group(1) for _, text in body for m in [re.match(r"^(?:let|var)\s+(\w+)\s*[=:]", text)] if m]
        if values:
            # The examples name values to show what a call gives; not every one is read afterwards.
            unique = list(dict.fromkeys(values))
            out.append("            _ = " + (unique[0] if len(unique) == 1 else "(" + ", ".join(unique) + ")"))
        out.append("        }")
        out.append("    }")
    out.append("}")
    return "\n".join(out) + "\n"


def main(argv):
    if any(arg in ("-h", "--help") for arg in argv):
        print(__doc__.strip())
        return 0
    unknown = [arg for arg in argv if arg != "--check"]
    if unknown:
        print(f"Error: unknown argument '{unknown[0]}'\nUSAGE: Tools/extract-examples.py [--check]", file=sys.stderr)
        return 64
    check = "--check" in argv
    try:
        wanted = {}
        classes = {}
        for doc in documents():
            blocks = parse(doc)
            if not blocks:
                continue
            name = class_name(doc)
            if name in classes:
                raise DocError(f"{doc} and {classes[name]} make the same test class {name}")
            classes[name] = doc
            wanted[generated_name(doc)] = (doc, generate(doc, blocks))
    except DocError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 65
    directory = os.path.join(ROOT, OUTPUT)
    present = sorted(name for name in os.listdir(directory) if name.endswith(".swift")) if os.path.isdir(directory) else []
    stale = [name for name in present if name not in wanted]
    changed = []
    for name, (doc, text) in sorted(wanted.items()):
        path = os.path.join(directory, name)
        current = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if current != text:
            changed.append((doc, name, text))
    if check:
        for doc, name, _ in changed:
            print(f"{doc} changed: run Tools/extract-examples.py ({OUTPUT}/{name} no longer matches its examples)")
        for name in stale:
            print(f"{OUTPUT}/{name} has no document with examples any more: run Tools/extract-examples.py")
        return 1 if changed or stale else 0
    os.makedirs(directory, exist_ok=True)
    for doc, name, text in changed:
        with open(os.path.join(directory, name), "w", encoding="utf-8") as file:
            file.write(text)
        print(f"wrote {OUTPUT}/{name}")
    for name in stale:
        os.remove(os.path.join(directory, name))
        print(f"removed {OUTPUT}/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
