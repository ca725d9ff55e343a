// The file editor: CodeMirror 6 with line numbers, highlighting by the file's language,
// search (Ctrl+F), undo history and bracket matching. Loaded on demand (React.lazy): the
// first load carries none of it. The text is owned by FileEditor: this reports each edit.
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import {
  bracketMatching,
  defaultHighlightStyle,
  foldGutter,
  indentOnInput,
  type LanguageSupport,
  syntaxHighlighting,
} from "@codemirror/language";
import { highlightSelectionMatches, search, searchKeymap } from "@codemirror/search";
import { Compartment, EditorState } from "@codemirror/state";
import {
  drawSelection,
  EditorView,
  highlightActiveLine,
  highlightActiveLineGutter,
  keymap,
  lineNumbers,
} from "@codemirror/view";
import { useEffect, useRef } from "react";

/** The language a file's extension names, its support loaded on demand too. */
async function languageOf(path: string): Promise<LanguageSupport | null> {
  const ext = path.split(".").pop()?.toLowerCase() ?? "";
  switch (ext) {
    case "js":
    case "mjs":
    case "cjs":
    case "jsx":
      return (await import("@codemirror/lang-javascript")).javascript({ jsx: true });
    case "ts":
    case "tsx":
      return (await import("@codemirror/lang-javascript")).javascript({ jsx: ext === "tsx", typescript: true });
    case "py":
      return (await import("@codemirror/lang-python")).python();
    case "json":
      return (await import("@codemirror/lang-json")).json();
    case "css":
      return (await import("@codemirror/lang-css")).css();
    case "html":
    case "htm":
    case "svg":
    case "xml":
      return (await import("@codemirror/lang-html")).html();
    case "md":
      return (await import("@codemirror/lang-markdown")).markdown();
    default:
      return null;
  }
}

export default function CodeEditor({
  path,
  initial,
  onChange,
}: {
  path: string;
  initial: string; // the text it opens with; later edits come from the editor itself
  onChange: (text: string) => void;
}) {
  const host = useRef<HTMLDivElement>(null);
  // The latest callback, read by the editor's listener (made once per path). Ctrl+S is
  // FileEditor's: the key event bubbles to it.
  const handlers = useRef({ onChange });
  handlers.current = { onChange };

  useEffect(() => {
    const language = new Compartment();
    const view = new EditorView({
      parent: host.current!,
      state: EditorState.create({
        doc: initial,
        extensions: [
          lineNumbers(),
          highlightActiveLineGutter(),
          foldGutter(),
          history(),
          drawSelection(),
          indentOnInput(),
          bracketMatching(),
          highlightActiveLine(),
          highlightSelectionMatches(),
          search({ top: true }),
          syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
          language.of([]),
          keymap.of([
            ...defaultKeymap,
            ...historyKeymap,
            ...searchKeymap,
            indentWithTab,
          ]),
          EditorView.contentAttributes.of({ "aria-label": `Edit ${path}`, spellcheck: "false" }),
          EditorView.updateListener.of((update) => {
            if (update.docChanged) handlers.current.onChange(update.state.doc.toString());
          }),
        ],
      }),
    });
    view.focus();
    let live = true;
    void languageOf(path).then((support) => {
      if (live && support) view.dispatch({ effects: language.reconfigure(support) });
    });
    return () => {
      live = false;
      view.destroy();
    };
    // `initial` is read once: the editor owns the text from then on.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [path]);

  return <div className="code-editor" ref={host} />;
}
