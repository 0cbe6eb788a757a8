// The docs run: every shell block of README.md and docs/*.md is run
// against a live Cordon on loopback, so an example that no longer works
// fails the build. The convention (docs/README.md, "Examples that run"):
// a block fenced ```sh runs; ```sh norun: <reason> is shown, never run;
// other languages are not shell. Each file gets a fresh Cordon and one
// scratch directory; its blocks run in order, each in its own bash, and
// the variables (and functions) one block sets are seen by the next.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import {
  existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cordonBin, freshDataDir, removeDir, startCordon } from './helpers.js';

const root = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const SHELLS = new Set(['sh', 'bash', 'shell', 'console', 'zsh']);
const BLOCK_TIMEOUT_MS = 180_000;

/** The fenced blocks of a Markdown file: `{ line, lang, info, text }`,
 * `line` being the opening fence's (1-based). */
export function fencedBlocks(markdown) {
  const blocks = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = lines[i].match(/^ {0,3}(`{3,}|~{3,})\s*(.*)$/);
    if (!open) continue;
    const [, fence, info] = open;
    if (fence[0] === '`' && info.includes('`')) continue; // not a fence: inline code
    const body = [];
    let j = i + 1;
    const close = new RegExp(`^ {0,3}${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`);
    while (j < lines.length && !close.test(lines[j])) body.push(lines[j++]);
    blocks.push({ line: i + 1, lang: info.split(/\s+/)[0].toLowerCase(), info: info.trim(), text: body.join('\n') });
    i = j;
  }
  return blocks;
}

/** A shell block's fate: `{ run: true }`, `{ run: false, reason }`, or
 * `{ run: false, error }` for an info string that is neither. */
function fate(block, where) {
  const rest = block.info.slice(block.lang.length).trim();
  if (rest === '') return { run: true };
  const norun = rest.match(/^norun\s*:\s*(.*)$/);
  if (!norun || norun[1].trim() === '') {
    return {
      run: false,
      error: `${where}: a shell block's info string is "${block.info}"; ` +
        'write ```sh to run it, or ```sh norun: <reason> to show it only',
    };
  }
  return { run: false, reason: norun[1].trim() };
}

const files = [
  'README.md',
  ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`),
];
const examples = files.map((file) => {
  const blocks = fencedBlocks(readFileSync(join(root, file), 'utf8'))
    .filter((b) => SHELLS.has(b.lang))
    .map((b) => ({ ...b, file, ...fate(b, `${file}:${b.line}`) }));
  return { file, blocks };
});

// --- What the examples talk to, all on 127.0.0.1 ---------------------------

/** The page `$PAGE` names, its download, and a scripted stand-in for
 * `run_task`'s model (an OpenAI-compatible chat completion that finishes). */
function startSite() {
  const page = `<!doctype html><html><head><title>Invoices</title></head><body>
<h1>Invoices</h1>
<p><a href="/march">March</a></p>
<button id="total" onclick="document.title='The March total is 1,240 EUR'">Show the total</button>
<p><label>Your CV <input type="file" id="cv"></label></p>
<p><a class="export" href="/report.csv">Export as CSV</a></p>
<button id="archive" onclick="document.title = confirm('Archive the March invoices?') ? 'Archived' : 'Invoices'">Archive</button>
</body></html>`;
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    if (req.method === 'POST' && url.pathname === '/v1/chat/completions') {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({
          choices: [{ message: { role: 'assistant', content: "Thought: The total is on the page.\nAction: finished(content='The March total is 1,240 EUR')" } }],
          usage: { prompt_tokens: 1000, completion_tokens: 20 },
        }));
      });
      return;
    }
    if (url.pathname === '/report.csv') {
      res.writeHead(200, { 'content-type': 'text/csv', 'content-disposition': 'attachment; filename="report.csv"' });
      res.end('month,total\nMarch,1240\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(url.pathname === '/march' ? '<!doctype html><title>March</title><p>1,240 EUR</p>' : page);
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => {
    const { port } = server.address();
    ok({ port, url: `http://127.0.0.1:${port}/`, stop: () => new Promise((r) => server.close(r)) });
  }));
}

// Sourced before every block: `curl` reaches nothing but loopback and
// fails on an HTTP error status, so a refused call fails its block.
const PRELUDE = `
curl() {
  local a
  for a in "$@"; do
    case "$a" in
      http://127.0.0.1:*|http://127.0.0.1/*|http://localhost:*|http://localhost/*) ;;
      [A-Za-z]*://*)
        echo "docs test: $a is not on 127.0.0.1; examples reach nothing else" >&2
        return 97 ;;
    esac
  done
  command curl --fail-with-body --show-error --max-time 150 "$@"
}
`;

/** Runs one block in bash in `dir` with the state the earlier blocks left;
 * resolves `{ code, output }`. */
function runBlock(block, dir, env) {
  const n = `${block.line}`;
  writeFileSync(join(dir, `.block-${n}.sh`), `${block.text}\n`);
  const script = [
    'set -a',
    '[ -f .state ] && source .state',
    'source .prelude',
    'unset __docs_reported',
    'set -Eeuo pipefail',
    // Which line of the block failed, for the report: the frame of the
    // block's file, also when the failure is inside a function it called.
    '__docs_err() {',
    '  [[ -n ${__docs_reported:-} ]] && return',
    '  __docs_reported=1',
    '  for ((__docs_i = 1; __docs_i < ${#BASH_SOURCE[@]}; __docs_i++)); do',
    '    if [[ ${BASH_SOURCE[__docs_i]} == .block-* ]]; then',
    '      echo "@@docs-failed-at ${BASH_LINENO[__docs_i-1]} $1" >&2; return',
    '    fi',
    '  done',
    '}',
    "trap '__docs_err \"$BASH_COMMAND\"' ERR",
    `source .block-${n}.sh`,
    'trap - ERR',
    'unset __docs_reported __docs_i',
    'set +eu',
    '{ export -p; declare -f; } > .state',
  ].join('\n');
  return new Promise((ok) => {
    const child = spawn('bash', ['-c', script], { cwd: dir, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c) => { output += c; });
    child.stderr.on('data', (c) => { output += c; });
    // A hung block is stopped: its process group, by the PID we started.
    const timer = setTimeout(() => {
      output += `\n[docs test: stopped after ${BLOCK_TIMEOUT_MS / 1000} s]`;
      try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ }
    }, BLOCK_TIMEOUT_MS);
    child.on('close', (code, signal) => { clearTimeout(timer); ok({ code: code ?? signal, output }); });
  });
}

let site;
before(async () => { site = await startSite(); });
after(async () => { await site?.stop(); });

test('every shell block is run or says why not', () => {
  const run = examples.flatMap((e) => e.blocks.filter((b) => b.run));
  const norun = examples.flatMap((e) => e.blocks.filter((b) => b.reason));
  const bad = examples.flatMap((e) => e.blocks.filter((b) => b.error)).map((b) => b.error);
  assert.deepEqual(bad, [], 'shell blocks that are neither run nor shown with a reason');
  assert.ok(run.length > 0, 'no runnable example found');
  const summary = [`${run.length} blocks run, ${norun.length} shown only:`,
    ...norun.map((b) => `  ${b.file}:${b.line}: ${b.reason}`)].join('\n');
  console.log(summary);
});

for (const { file, blocks } of examples) {
  const runnable = blocks.filter((b) => b.run);
  if (runnable.length === 0) continue;
  test(`the examples of ${file} run`, async () => {
    const dataDir = freshDataDir();
    const scratch = mkdtempSync(join(tmpdir(), 'cordon-docs-'));
    const settings = {
      CORDON_EGRESS_ALLOW: `127.0.0.1:${site.port}`,
      CORDON_EGRESS_RESOLVER: 'loopback-only',
      // docs/live-links.md: the tenant acme may hand out live links.
      CORDON_TENANT_LIVE_LINKS: JSON.stringify({ acme: { frame_ancestors: [], control: true } }),
      // docs/run-task.md: the scripted model above.
      CORDON_MODEL_BASE_URL: `http://127.0.0.1:${site.port}/v1`,
    };
    const server = await startCordon(dataDir, settings);
    try {
      const bin = join(scratch, '.bin');
      mkdirSync(bin);
      symlinkSync(cordonBin, join(bin, 'cordon'));
      writeFileSync(join(scratch, '.prelude'), PRELUDE);
      writeFileSync(join(scratch, 'cv.pdf'), '%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n');
      const env = {
        ...process.env,
        ...settings,
        CORDON_DATA_DIR: dataDir,
        CORDON_LOG_LEVEL: 'warn',
        CORDON_URL: server.url.replace('//localhost:', '//127.0.0.1:'),
        PAGE: site.url,
        PATH: `${bin}:${process.env.PATH}`,
      };
      assert.ok(existsSync(cordonBin), `no cordon binary at ${cordonBin} (set CORDON_BIN)`);
      for (const block of runnable) {
        const { code, output } = await runBlock(block, scratch, env);
        // DOCS_EXAMPLES_VERBOSE=1 shows what every block printed.
        if (process.env.DOCS_EXAMPLES_VERBOSE) console.log(`--- ${block.file}:${block.line} (exit ${code})\n${output}`);
        if (code !== 0) {
          // The block's text starts on the line after its fence.
          // The last report is the outermost (a command substitution
          // reports from its subshell first).
          const at = [...output.matchAll(/@@docs-failed-at (\d+) (.*)/g)].pop();
          const where = at ? `${block.file}:${block.line + Number(at[1])}` : `${block.file}:${block.line}`;
          assert.fail(`${where}: the example failed (exit ${code})${at ? `: ${at[2]}` : ''}\n` +
            `--- the block (${block.file}:${block.line})\n${block.text}\n` +
            `--- its output\n${output.replace(/(@@docs-failed-at |.*pop_var_context: ).*\n?/g, '')}`);
        }
      }
    } finally {
      await server.stop();
      removeDir(dataDir);
      removeDir(scratch);
    }
  });
}
