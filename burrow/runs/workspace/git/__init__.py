"""Git in a conversation's workspace: a repository in (clone), reviewed changes out (push, pull
request). Git always runs inside a sandbox (a push's credentialed git in a fresh one of its
own); the host only checks what git is given."""
