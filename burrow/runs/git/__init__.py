"""Git in a conversation's workspace: a repository in (clone), reviewed changes out (push, pull
request). Git always runs inside the sandbox; the host only checks what git is given."""
