/**
 * `flow completion bash|zsh|fish`: a completion script for the shell, generated from the commander
 * program itself (its commands, subcommands and options), so it never lists a command that is gone.
 * Each script holds tables keyed by the command path typed so far ("", "runs", "secret set"): the
 * subcommands, the options, the value-taking options and their choices at that path; bash and zsh
 * share one function that picks the candidates, fish has the same rules in its own syntax.
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

/** Each option's choices, keyed "<path>|<flag>". */
const choiceRows = (nodes: readonly CompletionNode[]): Array<[string, string[]]> =>
  nodes.flatMap((n) => Object.entries(n.choices).map(([flag, words]): [string, string[]] => [`${n.path}|${flag}`, words]));

/**
 * The tables (by command path: the subcommands, the options, the words that are no option, the
 * value-taking options, each option's choices) and `_flow_candidates`, in the syntax bash and zsh
 * share. `_flow_candidates CUR WORD...` (the words typed after `flow`, before the one being
 * completed) prints what to offer: after a value-taking option its choices; for a word starting
 * with `-` the options; else the subcommands or the argument's choices. Nothing printed means file
 * names (`flow submit <TAB>`, `--data-dir <TAB>`). A flag's value is never taken for a command.
 */
const shShared = (nodes: readonly CompletionNode[]): string =>
  [
    shCase("_flow_subcommands", nodes, (n) => n.subcommands),
    shCase("_flow_options", nodes, (n) => n.options),
    shCase("_flow_args", nodes, (n) => [...n.subcommands, ...n.argChoices]),
    shCase("_flow_valued", nodes, (n) => n.valued),
    [
      "_flow_choices() {",
      '  case "$1" in',
      ...choiceRows(nodes).map(([key, words]) => `    "${key}") echo "${words.join(" ")}" ;;`),
      "  esac",
      "}",
    ].join("\n"),
    `_flow_candidates() {
  local cur=$1 cmdpath="" prev="" skip="" word
  shift
  for word in "$@"; do
    if [[ -z $skip ]]; then
      case " $(_flow_subcommands "$cmdpath") " in *" $word "*) cmdpath=\${cmdpath:+$cmdpath }$word ;; esac
    fi
    skip=""
    case " $(_flow_valued "$cmdpath") " in *" $word "*) [[ $word == -* ]] && skip=1 ;; esac
    prev=$word
  done
  if [[ -n $prev && $prev == -* && " $(_flow_valued "$cmdpath") " == *" $prev "* ]]; then
    _flow_choices "$cmdpath|$prev"
  elif [[ $cur == -* ]]; then
    _flow_options "$cmdpath"
  else
    _flow_args "$cmdpath"
  fi
}`,
  ].join("\n");

/** bash: the candidates, filtered by the word typed; none, and bash offers file names (`-o default`). */
const bashScript = (nodes: readonly CompletionNode[]): string => `# flow completion for bash: eval "$(flow completion bash)" in ~/.bashrc
${shShared(nodes)}
_flow() {
  local cur=\${COMP_WORDS[COMP_CWORD]}
  COMPREPLY=($(compgen -W "$(_flow_candidates "$cur" "\${COMP_WORDS[@]:1:COMP_CWORD-1}")" -- "$cur"))
}
complete -o default -F _flow flow
`;

/** zsh: the same candidates through compadd, or _files when there are none. */
const zshScript = (nodes: readonly CompletionNode[]): string => `#compdef flow
# flow completion for zsh: eval "$(flow completion zsh)" in ~/.zshrc, after compinit
${shShared(nodes)}
_flow() {
  local offer
  offer=$(_flow_candidates "\${words[CURRENT]}" "\${(@)words[2,CURRENT-1]}")
  if [[ -n $offer ]]; then
    compadd -- \${=offer}
  else
    _files
  fi
}
compdef _flow flow
`;

const fishSwitch = (fn: string, rows: ReadonlyArray<readonly [string, string[]]>): string =>
  [
    `function ${fn}`,
    "    switch $argv[1]",
    ...rows.flatMap(([key, words]) => [`        case '${key}'`, `            echo ${words.join(" ")}`]),
    "    end",
    "end",
  ].join("\n");

const fishTable = (fn: string, nodes: readonly CompletionNode[], pick: (n: CompletionNode) => string[]): string =>
  fishSwitch(
    fn,
    nodes.map((n) => [n.path, pick(n)]),
  );

/** fish: the same rules as \`_flow_candidates\`; no candidates, and fish's own path completion. */
const fishScript = (
  nodes: readonly CompletionNode[],
): string => `# flow completion for fish: flow completion fish > ~/.config/fish/completions/flow.fish
${fishTable("__flow_subcommands", nodes, (n) => n.subcommands)}
${fishTable("__flow_options", nodes, (n) => n.options)}
${fishTable("__flow_args", nodes, (n) => [...n.subcommands, ...n.argChoices])}
${fishTable("__flow_valued", nodes, (n) => n.valued)}
${fishSwitch("__flow_choices", choiceRows(nodes))}
function __flow_offer --description 'flow completion: the words given (one line), or file names when there are none'
    set -l words (string split -n ' ' -- $argv[2..-1])
    if test (count $words) -gt 0
        printf '%s\\n' $words
    else
        __fish_complete_path $argv[1]
    end
end
function __flow_candidates --description 'flow completion: __flow_candidates CUR WORD... (the words after flow)'
    set -l cur $argv[1]
    set -l cmdpath ''
    set -l prev ''
    set -l skip ''
    for word in $argv[2..-1]
        if test -z "$skip"; and contains -- $word (string split ' ' -- (__flow_subcommands "$cmdpath"))
            set cmdpath (string trim -- "$cmdpath $word")
        end
        set skip ''
        if string match -q -- '-*' $word; and contains -- $word (string split ' ' -- (__flow_valued "$cmdpath"))
            set skip 1
        end
        set prev $word
    end
    if string match -q -- '-*' $prev; and contains -- $prev (string split ' ' -- (__flow_valued "$cmdpath"))
        __flow_offer $cur (__flow_choices "$cmdpath|$prev")
    else if string match -q -- '-*' $cur
        string split -n ' ' -- (__flow_options "$cmdpath")
    else
        __flow_offer $cur (__flow_args "$cmdpath")
    end
end
complete -c flow -f -a '(__flow_candidates (commandline -ct) (commandline -opc)[2..-1])'
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
