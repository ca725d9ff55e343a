"""One agent run: the loop (model -> tools -> model), the model context as a projection of
the journal, and the loop's hooks with their implementations (approvals and risk, budget,
guard, compaction and the window, instructions, attachments, skills, subagents, profiles,
masked model requests). Depends only on `runs.journal` below it."""
