// A view that failed to render says what failed and offers a way out: never a blank page.
import { Component, type ErrorInfo, type ReactNode } from "react";

interface Props {
  /** What the boundary wraps, for the message: "this conversation", "Burrow". */
  what: string;
  children: ReactNode;
  /** A way out besides reloading, e.g. back to the conversation list. */
  onLeave?: () => void;
}

export class ErrorBoundary extends Component<Props, { error: Error | null }> {
  state: { error: Error | null } = { error: null };

  static getDerivedStateFromError(error: unknown): { error: Error } {
    return { error: error instanceof Error ? error : new Error(String(error)) };
  }

  componentDidCatch(error: Error, info: ErrorInfo): void {
    console.error(`Burrow could not show ${this.props.what}:`, error, info.componentStack);
  }

  render(): ReactNode {
    const { error } = this.state;
    if (!error) return this.props.children;
    return (
      <div className="workspace">
        <main className="conversation">
          <section className="crashed" role="alert" aria-label="Something went wrong">
            <h2>Burrow could not show {this.props.what}.</h2>
            <p className="muted">The server keeps everything; the page failed while drawing it:</p>
            <pre className="crash-detail">{error.message}</pre>
            <div className="crash-actions">
              {this.props.onLeave && (
                <button
                  type="button"
                  className="primary"
                  onClick={() => {
                    this.setState({ error: null });
                    this.props.onLeave?.();
                  }}
                >
                  Back to conversations
                </button>
              )}
              <button type="button" onClick={() => location.reload()}>
                Reload
              </button>
            </div>
          </section>
        </main>
      </div>
    );
  }
}
