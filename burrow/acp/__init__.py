"""`burrow acp`: the Agent Client Protocol (Zed, JetBrains) over stdio, as a client of a
running Burrow server's HTTP API. Tools run in the conversation's sandbox, never through
the editor's file system or terminal."""
