/** Text for a command line a user copies into a POSIX shell (sh, bash, zsh). */

/** `text` in single quotes, each `'` in it closed, escaped and reopened: the shell reads it back whole. */
export const shellQuote = (text: string): string => `'${text.replaceAll("'", `'\\''`)}'`;

/** `text` as it is when a shell would read it as one word unchanged, else quoted (shellQuote). */
export const shellWord = (text: string): string => (/^[\w./@%+=:,-]+$/.test(text) ? text : shellQuote(text));
