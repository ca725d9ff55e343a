// A conversation's title: from its first message, and a fork's from its source's.

export const DEFAULT_TITLE = "New conversation";

/** The first line of a message, cut to fit the list. */
export function titleFrom(message: string): string {
  const line = message.trim().split("\n")[0]!.trim();
  return line.length > 60 ? `${line.slice(0, 57)}…` : line || DEFAULT_TITLE;
}

const FORK_MARKS = /(\s*\(fork\))+$/;

/** A fork's title: the edited first message's, when that is what was edited; else the
 * source's marked once as a fork (a fork of a fork is not "… (fork) (fork)"). */
export function forkTitle(source: string, editedFirstMessage?: string): string {
  if (editedFirstMessage !== undefined) return titleFrom(editedFirstMessage);
  return `${source.replace(FORK_MARKS, "") || DEFAULT_TITLE} (fork)`;
}
