/**
 * `flow completion bash|zsh|fish`: a completion script for the shell, generated from the commander
 * program itself (its commands, subcommands and options), so it never lists a command that is gone.
 * Each script holds two tables keyed by the command path typed so far ("", "runs", "secret set"):
 * the subcommands at that path, and every word to offer there (subcommands, then options).
 */
import { Argument, Command } from "commander";
import type { CommandDeps } from "./context.js";
import { examples } from "./options.js";

export const SHELLS = ["bash", "zsh", "fish"] as const;
export type Shell = (typeof SHELLS)[number];

/** What the shell may offer after one command path. */
export interface CompletionNode {
  /** Space-separated command path below `flow`; "" for `flow` itself. */
  path: string;
  subcommands: string[];
  options: string[];
  /** The options that take a value (`--as`, `-o`, `--url`): the word after one is its value, not a command or option. */
  valued: string[];
  /** An option's choices (`--as`: script graph pipeline yaml); an option that takes any value has none. */
  choices: Record<string, string[]>;
  /** The choices of the command's first argument (`completion <shell>`: bash zsh fish), if it has any. */
  argChoices: string[];
}

// Only plain words reach a script: anything else could not be offered safely inside shell quotes.
const WORD = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
const FLAG = /^--?[A-Za-z0-9][A-Za-z0-9-]*$/;

const optionsOf = (cmd: Command, inherited: readonly string[]): string[] => {
  const own = cmd.options.filter((o) => !o.hidden).flatMap((o) => [o.long, o.short]);
  return [...new Set([...own, ...inherited, "--help"])].filter((f): f is string => typeof f === "string" && FLAG.test(f));
};

const namesOf = (cmd: Command): string[] => [cmd.name(), ...cmd.aliases()].filter((n) => WORD.test(n));

const plainWords = (words: readonly string[] | undefined): string[] => (words ?? []).filter((w) => WORD.test(w));

/** The value-taking options of `cmd` (and the inherited globals, which all take one) with their choices. */
const valuedOf = (cmd: Command, inherited: readonly string[]): { valued: string[]; choices: Record<string, string[]> } => {
  const choices: Record<string, string[]> = {};
  const valued = new Set(inherited);
  for (const o of cmd.options.filter((x) => !x.hidden && (x.required || x.optional)))
    for (const flag of [o.long, o.short])
      if (typeof flag === "string" && FLAG.test(flag)) {
        valued.add(flag);
        const words = plainWords(o.argChoices);
        if (words.length > 0) choices[flag] = words;
      }
  return { valued: [...valued], choices };
};

/**
 * Every command path of the program, depth first, with what may follow it; an alias is a path of
 * its own (`runs list` completes as `runs ls`). Global options are offered at every level.
 */
export const completionTree = (program: Command): CompletionNode[] => {
  const globals = program.options.filter((o) => !o.hidden && o.long !== "--version").flatMap((o) => (o.long ? [o.long] : []));
  const valuedGlobals = program.options.filter((o) => !o.hidden && o.required).flatMap((o) => (o.long ? [o.long] : []));
  const nodes: CompletionNode[] = [];
  const visit = (cmd: Command, path: string): void => {
    nodes.push({
      path,
      subcommands: cmd.commands.flatMap(namesOf),
      options: optionsOf(cmd, path === "" ? [] : globals),
      ...valuedOf(cmd, path === "" ? [] : valuedGlobals),
      argChoices: plainWords(cmd.registeredArguments[0]?.argChoices),
    });
    for (const sub of cmd.commands) for (const name of namesOf(sub)) visit(sub, path === "" ? name : `${path} ${name}`);
  };
  visit(program, "");
  return nodes;
};

/** A `case` over the paths, answering one line of words (sh syntax: bash and zsh). */
const shCase = (fn: string, nodes: readonly CompletionNode[], pick: (n: CompletionNode) => string[]): string =>
  [`${fn}() {`, '  case "$1" in', ...nodes.map((n) => `    "${n.path}") echo "${pick(n).join(" ")}" ;;`), "  esac", "}"].join("\n");

const tables = (nodes: readonly CompletionNode[]): string =>
  `${shCase("_flow_subcommands", nodes, (n) => n.subcommands)}\n${shCase("_flow_words", nodes, (n) => [...n.subcommands, ...n.options])}`;

/** bash's own tables: the options alone, the words that are no option, the value-taking options, and each one's choices ("<path>|<flag>"). */
const bashTables = (nodes: readonly CompletionNode[]): string =>
  [
    shCase("_flow_options", nodes, (n) => n.options),
    shCase("_flow_args", nodes, (n) => [...n.subcommands, ...n.argChoices]),
    shCase("_flow_valued", nodes, (n) => n.valued),
    [
      "_flow_choices() {",
      '  case "$1" in',
      ...nodes.flatMap((n) => Object.entries(n.choices).map(([flag, words]) => `    "${n.path}|${flag}") echo "${words.join(" ")}" ;;`)),
      "  esac",
      "}",
    ].join("\n"),
  ].join("\n");

/**
 * After a value-taking option: its choices, or nothing (bash then offers file names, `-o default`).
 * A word starting with `-`: the options. Else the subcommands or the argument's choices, and file
 * names when there are none (`flow submit <TAB>`).
 */
const bashScript = (nodes: readonly CompletionNode[]): string => `# flow completion for bash: eval "$(flow completion bash)" in ~/.bashrc
${tables(nodes)}
${bashTables(nodes)}
_flow() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev="" cmdpath="" word i skip=""
  ((COMP_CWORD > 1)) && prev=\${COMP_WORDS[COMP_CWORD - 1]}
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=\${COMP_WORDS[i]}
    if [[ -z $skip ]]; then
      case " $(_flow_subcommands "$cmdpath") " in *" $word "*) cmdpath=\${cmdpath:+$cmdpath }$word ;; esac
    fi
    skip=""
    case " $(_flow_valued "$cmdpath") " in *" $word "*) [[ $word == -* ]] && skip=1 ;; esac
  done
  COMPREPLY=()
  if [[ -n $prev && $prev == -* && " $(_flow_valued "$cmdpath") " == *" $prev "* ]]; then
    COMPREPLY=($(compgen -W "$(_flow_choices "$cmdpath|$prev")" -- "$cur"))
  elif [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$(_flow_options "$cmdpath")" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$(_flow_args "$cmdpath")" -- "$cur"))
  fi
}
complete -o default -F _flow flow
`;

const zshScript = (nodes: readonly CompletionNode[]): string => `#compdef flow
# flow completion for zsh: eval "$(flow completion zsh)" in ~/.zshrc, after compinit
${tables(nodes)}
_flow() {
  local cmdpath="" word i
  for ((i = 2; i < CURRENT; i++)); do
    word=\${words[i]}
    case " $(_flow_subcommands "$cmdpath") " in *" $word "*) cmdpath=\${cmdpath:+$cmdpath }$word ;; esac
  done
  compadd -- \${=$(_flow_words "$cmdpath")}
}
compdef _flow flow
`;

const fishSwitch = (fn: string, nodes: readonly CompletionNode[], pick: (n: CompletionNode) => string[]): string =>
  [
    `function ${fn}`,
    "    switch $argv[1]",
    ...nodes.flatMap((n) => [`        case '${n.path}'`, `            echo ${pick(n).join(" ")}`]),
    "    end",
    "end",
  ].join("\n");

const fishScript = (
  nodes: readonly CompletionNode[],
): string => `# flow completion for fish: flow completion fish > ~/.config/fish/completions/flow.fish
${fishSwitch("__flow_subcommands", nodes, (n) => n.subcommands)}
${fishSwitch("__flow_words", nodes, (n) => [...n.subcommands, ...n.options])}
function __flow_path
    set -l cmdpath ''
    for word in (commandline -opc)[2..-1]
        if contains -- $word (string split ' ' -- (__flow_subcommands $cmdpath))
            set cmdpath (string trim -- "$cmdpath $word")
        end
    end
    echo $cmdpath
end
complete -c flow -f -a '(string split " " -- (__flow_words (__flow_path)))'
`;

/** The completion script for `shell`, from the program's commands. */
export const completionScript = (program: Command, shell: Shell): string => {
  const nodes = completionTree(program);
  if (shell === "zsh") return zshScript(nodes);
  if (shell === "fish") return fishScript(nodes);
  return bashScript(nodes);
};

export const completionCommand = (deps: CommandDeps): Command =>
  new Command("completion")
    .description("print a shell completion script for flow's commands and options")
    .addArgument(new Argument("<shell>", "the shell to complete in").choices(SHELLS))
    .addHelpText(
      "after",
      examples(
        'eval "$(flow completion bash)"   # in ~/.bashrc',
        'eval "$(flow completion zsh)"    # in ~/.zshrc, after compinit',
        "flow completion fish > ~/.config/fish/completions/flow.fish",
      ),
    )
    .action((shell: Shell, _opts: unknown, cmd: Command) => {
      const program = cmd.parent ?? cmd;
      deps.io.out(completionScript(program, shell));
    });
