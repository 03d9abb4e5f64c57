// Real-browser test of the swept dashboard (run by run.sh).
//   node browser_test.mjs SWEPT_BINARY WORK_DIR SCHEMA_SQL
// Creates a database from store/schema.sql with the sqlite3 command,
// fills it with trials whose names and values hold <script> and quotes,
// serves it with the real `swept web` (port 0, with a token), drives Debian's
// chromium through it with playwright-core and checks: the trials table lists
// the trials, the charts (the optimisation history with one dot per
// completed trial, by trial and by time) have drawn, a sweep whose metric no
// trial reports shows the warning, hostile text shows as text and never runs,
// rows the test inserts while the page is open appear (live update), every
// state's badge has its tone's colour (app.css styles tones only), and an
// early-stopped trial shows as such in the trials table and gets its stop
// mark on the learning curves; a sweep with three objectives shows its
// Pareto front, the objectives' parallel coordinates and its infeasible
// trial (the database is brought to schema version 5,
// the stop_* columns of version 4 included, by the migrations' own ALTERs);
// a sweep with one metric and a constraint shows its infeasible trial apart
// on the points charts (never as best), and its warm start's imported
// trial with a badge naming its source and a filter of its own; the
// parameter-server metrics swept-train reports (staleness_mean,
// staleness_max, gradients_dropped) are curve metrics and sortable columns.
// A real population-based-training sweep (`swept run` of tests/pbt_trial.sh,
// its own database and `swept web`) shows its population's curves with
// every exploit of its lineage marked, and the best member's schedule; a
// population of 64 (written into that database) shows all 64 curves.
// Then the same over HTTPS: `swept web --tls-cert/--tls-key` with a throwaway
// self-signed certificate (openssl CLI), chromium told to accept it, the page
// loaded by its https:// address with the token, its cookie Secure.
// Screenshots at 1280 and 1920 px land in WORK_DIR/screenshots. Every wait has
// a deadline; exit 0 on success, 1 on any failure.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const [swept, work, schemaPath] = process.argv.slice(2);
const sourceDir = path.dirname(path.dirname(path.resolve(schemaPath)));
const XSS = `<script>window.__xss=1</script>"'&<img src=x onerror="window.__xss=2">`;
const TOKEN = 'browser-test-token';
const TRIALS = 12;
const STOP_REASON = 'hyperband: band 20, value 1.5 worse than threshold 0.9: stop';
const shots = path.join(work, 'screenshots');
mkdirSync(shots, { recursive: true });
const scratch = mkdtempSync(path.join(tmpdir(), 'swept-browser-'));
const db = path.join(scratch, 'swept.db');
const pbtDb = path.join(scratch, 'pbt.db');

const q = (s) => `'${String(s).replaceAll("'", "''")}'`;
// Runs `text` with the sqlite3 command. schema.sql writes its state CHECK
// lists empty (swept's writer fills them in from its state tables when it
// opens the file); this file is made without the writer, so rows go in with
// CHECK constraints off.
function sql(text) {
  execFileSync('sqlite3', ['-bail', db], { input: 'PRAGMA ignore_check_constraints = ON;\n' + text });
}
// The rows of a query on `file`, each a list of its columns.
function query(file, text) {
  return execFileSync('sqlite3', ['-bail', '-separator', '|', file, text], { encoding: 'utf8' })
    .split('\n').filter((l) => l).map((l) => l.split('|'));
}

function trialSql(i, state, steps) {
  const id = 1000 + i;
  const params = JSON.stringify({ lr: 0.001 * (i + 1), hidden: [64, 128, 256][i % 3], [XSS]: XSS });
  const loss = 1 / (i + 1) + (i % 3) * 0.05;
  // Completed trials end in an order other than their index's (the history's time axis).
  const ended = state === 'completed' ? 1700000100 + ((i * 7) % TRIALS) * 10 : 'NULL';
  let s = `INSERT INTO trials (id, sweep_id, idx, params, command, state, attempts, agent, gpus, gpu_fraction, env,
           metric_value, created_at, started_at, ended_at) VALUES (${id}, 1, ${i}, ${q(params)},
           ${q(JSON.stringify(['swept-train', XSS]))}, '${state}', 1, 'host-a', '[0]', 0.5,
           ${q(JSON.stringify({ SWEPT_TRIAL_ID: String(id) }))}, ${loss}, 1700000000, 1700000001, ${ended});\n`;
  for (let step = 0; step < steps; step++) {
    s += `INSERT INTO metrics VALUES (${id}, 'loss', ${step}, ${loss + 1 / (step + 1)});\n`;
    s += `INSERT INTO metrics VALUES (${id}, ${q(XSS)}, ${step}, ${step});\n`;
  }
  s += `INSERT INTO trial_latest VALUES (${id}, 'loss', ${steps - 1}, ${loss});\n`;
  s += `INSERT INTO trial_latest VALUES (${id}, ${q(XSS)}, ${steps - 1}, ${steps - 1});\n`;
  s += `INSERT INTO trial_logs VALUES (${id}, ${q('epoch 1 done\n' + XSS + '\n')});\n`;
  return s;
}

function fixture() {
  let s = readFileSync(schemaPath, 'utf8') + '\nPRAGMA journal_mode=WAL;\nBEGIN;\n';
  // Versions 2 to 5 (store/writer.cpp, Writer::migrate).
  s += `ALTER TABLE attempts ADD COLUMN metrics_seq INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE trials ADD COLUMN suggestion TEXT;
        ALTER TABLE trials ADD COLUMN stop_rule TEXT; ALTER TABLE trials ADD COLUMN stop_at INTEGER;
        ALTER TABLE trials ADD COLUMN stop_step INTEGER; ALTER TABLE trials ADD COLUMN stop_value REAL;
        ALTER TABLE trials ADD COLUMN stop_threshold REAL; ALTER TABLE trials ADD COLUMN stop_reason TEXT;
        ALTER TABLE trials ADD COLUMN stop_decided_at REAL;
        ALTER TABLE agents ADD COLUMN quarantine TEXT;
        INSERT INTO meta (key, value) VALUES ('schema_version', '5');\n`;
  s += `INSERT INTO sweeps (id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at)
        VALUES (1, ${q('mnist ' + XSS)}, 'grid', 'loss', 'minimize', 'spec', 'running', ${TRIALS + 1}, ${TRIALS}, 1700000000);\n`;
  for (let i = 0; i < TRIALS; i++) s += trialSql(i, i < TRIALS - 2 ? 'completed' : 'running', 60);
  // Sweep 2 names val_loss; its one completed trial reported only loss.
  s += `INSERT INTO sweeps (id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at)
        VALUES (2, 'typo', 'grid', 'val_loss', 'minimize', 'spec', 'running', 1, 1, 1700000000);
        INSERT INTO trials (id, sweep_id, idx, params, command, state, attempts, created_at, ended_at)
        VALUES (2000, 2, 0, '{}', '[]', 'completed', 1, 1700000000, 1700000050);
        INSERT INTO trial_latest VALUES (2000, 'loss', 3, 0.25);\n`;
  // Sweep 3: trial 3000 completed its 40 steps; hyperband stopped 3001 at step 20.
  s += `INSERT INTO sweeps (id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at)
        VALUES (3, 'halving', 'random', 'loss', 'minimize', 'spec', 'running', 2, 2, 1700000000);
        INSERT INTO trials (id, sweep_id, idx, params, command, state, attempts, metric_value, created_at, ended_at)
        VALUES (3000, 3, 0, '{"lr": 0.1}', '[]', 'completed', 1, 0.2, 1700000000, 1700000050);
        INSERT INTO trials (id, sweep_id, idx, params, command, state, attempts, metric_value, created_at, ended_at,
                            stop_rule, stop_at, stop_step, stop_value, stop_threshold, stop_reason, stop_decided_at)
        VALUES (3001, 3, 1, '{"lr": 0.9}', '[]', 'early_stopped', 1, 1.5, 1700000000, 1700000030,
                'hyperband', 20, 20, 1.5, 0.9, ${q(STOP_REASON)}, 1700000030);\n`;
  for (let step = 0; step <= 40; step++) {
    s += `INSERT INTO metrics VALUES (3000, 'loss', ${step}, ${0.2 + 1 / (step + 1)});\n`;
    if (step <= 20) s += `INSERT INTO metrics VALUES (3001, 'loss', ${step}, ${1.5 + 1 / (step + 1)});\n`;
  }
  s += `INSERT INTO trial_latest VALUES (3000, 'loss', 40, 0.2); INSERT INTO trial_latest VALUES (3001, 'loss', 20, 1.5);\n`;
  s += objectivesSweepSql();
  s += constrainedSweepSql();
  s += staleSweepSql();
  s += `INSERT INTO agents VALUES ('host-a', ${q(XSS)}, 'alive', 4, 1700000000, 1700000100, NULL);\n`;
  s += `INSERT INTO agent_gpus VALUES ('host-a', 0, 'GPU-0', ${q('H100 ' + XSS)}, 85899345920);\n`;
  return s + 'COMMIT;\n';
}

// Sweep 4: three objectives (loss down, acc up, latency down) and a
// constraint (mem at most 8), as its sweep file says. 4000, 4001 and 4004
// are the Pareto front; 4002 would be on it but violates mem; 4003 is
// dominated by 4000.
const FRONT = [4000, 4001, 4004];
function objectivesSweepSql() {
  const spec = 'method: random\nrun_cap: 5\nmetrics:\n  - {name: loss, goal: minimize}\n  - {name: acc, goal: maximize}\n' +
    '  - {name: latency, goal: minimize}\nconstraints:\n  - {name: mem, max: 8}\nparameters:\n  lr: {min: 0.0, max: 1.0}\n';
  const rows = [[1, 0.5, 10, 4], [2, 0.9, 10, 4], [0.5, 0.95, 5, 16], [3, 0.4, 20, 4], [1.5, 0.6, 2, 4]];
  let s = `INSERT INTO sweeps (id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at)
        VALUES (4, 'front', 'random', NULL, NULL, ${q(spec)}, 'running', 5, 5, 1700000000);\n`;
  rows.forEach((r, i) => {
    const id = 4000 + i;
    s += `INSERT INTO trials (id, sweep_id, idx, params, command, state, attempts, created_at, ended_at)
          VALUES (${id}, 4, ${i}, '{"lr": ${0.1 * (i + 1)}}', '[]', 'completed', 1, 1700000000, 1700000050);\n`;
    ['loss', 'acc', 'latency', 'mem'].forEach((name, k) => {
      s += `INSERT INTO trial_latest VALUES (${id}, '${name}', 1, ${r[k]});\n`;
    });
  });
  return s;
}

// Sweep 5: one metric (loss, minimised), a constraint (mem at most 8) and a
// warm start. 5001 has the best loss of the completed trials but violates
// mem; 5003 is running with a better one still; 5002 was imported (index
// -1) and is the best feasible trial, so the sweep's best.
const IMPORTED_FROM = 'imported from sweep 3, trial 17';
function constrainedSweepSql() {
  const spec = 'method: random\nrun_cap: 3\nmetric: {name: loss, goal: minimize}\nconstraints:\n  - {name: mem, max: 8}\n' +
    'warm_start: {sweep: 3}\nparameters:\n  lr: {min: 0.0, max: 1.0}\n';
  let s = `INSERT INTO sweeps (id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at)
        VALUES (5, 'constrained', 'random', 'loss', 'minimize', ${q(spec)}, 'running', 3, 3, 1700000000);\n`;
  [[5000, 0, 'completed', 0.5, 4, 'exit code 0'], [5001, 1, 'completed', 0.1, 16, 'exit code 0'],
    [5002, -1, 'imported', 0.3, 2, IMPORTED_FROM], [5003, 2, 'running', 0.05, 4, null]].forEach(([id, idx, state, loss, mem, reason]) => {
    s += `INSERT INTO trials (id, sweep_id, idx, params, command, state, attempts, metric_value, reason, created_at, ended_at)
          VALUES (${id}, 5, ${idx}, '{"lr": ${0.2 * (idx + 2)}}', '[]', '${state}', ${state === 'imported' ? 0 : 1}, ${loss},
                  ${reason ? q(reason) : 'NULL'}, 1700000000, 1700000050);
          INSERT INTO trial_latest VALUES (${id}, 'loss', 1, ${loss}); INSERT INTO trial_latest VALUES (${id}, 'mem', 1, ${mem});\n`;
  });
  return s;
}

// Sweep 6: two parameter-server trials of swept-train (--strategy=ps) with
// the metrics its worker 0 reports on every log line (trainer/dist/ps_run.cpp):
// 6001 (async) falls further behind than 6000 (sync, one backup worker,
// which drops gradients instead).
const STALENESS = ['staleness_mean', 'staleness_max', 'gradients_dropped'];
function staleSweepSql() {
  let s = `INSERT INTO sweeps (id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at)
        VALUES (6, 'ps', 'grid', 'val_accuracy', 'maximize', 'spec', 'completed', 2, 2, 1700000000);\n`;
  [[6000, 0, 'sync'], [6001, 1, 'async']].forEach(([id, idx, mode]) => {
    s += `INSERT INTO trials (id, sweep_id, idx, params, command, state, attempts, metric_value, created_at, ended_at)
          VALUES (${id}, 6, ${idx}, '{"ps_mode": "${mode}"}', '[]', 'completed', 1, 0.9, 1700000000, 1700000050);\n`;
    for (let step = 10; step <= 100; step += 10) {
      const v = { val_accuracy: 0.9, staleness_mean: mode === 'async' ? 2 + step / 100 : 0,
        staleness_max: mode === 'async' ? 3 + step / 20 : 0, gradients_dropped: mode === 'sync' ? step / 10 : 0 };
      for (const [name, value] of Object.entries(v)) {
        s += `INSERT INTO metrics VALUES (${id}, '${name}', ${step}, ${value});\n`;
        if (step === 100) s += `INSERT INTO trial_latest VALUES (${id}, '${name}', ${step}, ${value});\n`;
      }
    }
  });
  return s;
}

// A real pbt sweep: `swept run` of a population of 4 members of
// tests/pbt_trial.sh (q climbs by --lr a step; the worst copies the best's
// checkpoint every 10 steps with lr doubled), into its own database.
function runPbtSweep() {
  const file = path.join(scratch, 'pbt.json');
  writeFileSync(file, JSON.stringify({
    name: 'pbt', method: 'pbt', metric: { name: 'q', goal: 'maximize' }, seed: 11,
    command: [path.join(sourceDir, 'tests', 'pbt_trial.sh'), '${args}'],
    parameters: { lr: { values: [0.1, 0.2, 0.3, 0.4] }, steps: { value: 30 } },
    pbt: { population: 4, interval: 10, max_steps: 30, resample_probability: 0, perturb: [2],
      hyperparam_mutations: { lr: { min: 0.01, max: 10 } } },
  }));
  execFileSync(swept, ['run', file, '--db', pbtDb, '--workdir', path.join(scratch, 'pbt-work'), '--slots', '4',
    '--dashboard', 'off', '--progress', 'off'], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 120000,
    env: { ...process.env, PBT_LEDGER: path.join(scratch, 'pbt-ledger') } });
}

// A second pbt sweep in the same database, written with the sqlite3 command:
// a population of BIG_POPULATION members (more than the 50 trials one
// /api/series request takes), each with 30 steps of q, and an exploit at
// step 10 for each of the last 8 members (member i copied member i - 8), so
// that marks fall on members past the first 50.
const BIG_POPULATION = 64;
const BIG_SWEEP = 2;
function addBigPopulation() {
  let s = 'PRAGMA ignore_check_constraints = ON;\nBEGIN;\n';
  s += `INSERT INTO sweeps (id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at)
        SELECT ${BIG_SWEEP}, 'pbt ${BIG_POPULATION}', method, metric_name, metric_goal, spec, 'completed',
               ${BIG_POPULATION}, ${BIG_POPULATION}, created_at FROM sweeps WHERE id = 1;\n`;
  for (let i = 0; i < BIG_POPULATION; i++) {
    const id = 1000 + i, lr = 0.01 * (i + 1), final = 30 * lr;
    s += `INSERT INTO trials (id, sweep_id, idx, params, command, state, attempts, metric_value, created_at, ended_at)
          VALUES (${id}, ${BIG_SWEEP}, ${i}, '{"lr": ${lr}}', '[]', 'completed', 3, ${final}, 1700000000, 1700000050);\n`;
    for (let step = 1; step <= 30; step++) s += `INSERT INTO metrics VALUES (${id}, 'q', ${step}, ${step * lr});\n`;
    s += `INSERT INTO trial_latest VALUES (${id}, 'q', 30, ${final});\n`;
    s += `INSERT INTO pbt_lineage (trial_id, round, from_step, params, decided_at) VALUES (${id}, 0, 0, '{"lr": ${lr}}', 1700000000);\n`;
    if (i >= BIG_POPULATION - 8) {
      s += `INSERT INTO pbt_lineage (trial_id, round, from_step, donor_trial_id, donor_segment, params, changes, decided_at)
            VALUES (${id}, 1, 10, ${id - 8}, 1, '{"lr": ${2 * lr}}', '["lr: doubled"]', 1700000010);\n`;
    }
  }
  execFileSync('sqlite3', ['-bail', pbtDb], { input: s + 'COMMIT;\n' });
}

// A population larger than one /api/series request: every member's curve is
// drawn (the series come in pages), and the exploits of members past the
// first 50 are marked.
async function checkBigPopulation(page) {
  addBigPopulation();
  await page.goto(`${pbtServer.url}#/sweeps/${BIG_SWEEP}`);
  await until('the big population panel', () => page.locator('#population-panel').isVisible());
  await until(`${BIG_POPULATION} members' curves`, async () =>
    (await page.locator('#population svg path.line').count()) === BIG_POPULATION);
  await until('the 8 exploit marks', async () => (await page.locator('#population svg path.exploit-mark').count()) === 8);
  const marked = (await page.locator('#population svg path.exploit-mark').evaluateAll((ns) =>
    ns.map((n) => Number(n.dataset.trial)))).sort((a, b) => a - b);
  const expected = Array.from({ length: 8 }, (_, k) => 1000 + BIG_POPULATION - 8 + k);
  if (JSON.stringify(marked) !== JSON.stringify(expected)) throw new Error(`exploit marks on ${marked}, not ${expected}`);
  const note = await page.locator('#population-panel .note').textContent();
  if (!note.startsWith(`${BIG_POPULATION} members, 8 exploits`)) throw new Error(`the population's note: ${note}`);
  await page.screenshot({ path: path.join(shots, 'pbt-64-1280.png'), fullPage: true });
  console.log(`browser test: a population of ${BIG_POPULATION} shows every member's curve`);
}

// Every state of every table (GET /api/info) is shown in its tone's colour:
// a badge of each tone class the page can make has a background of its own
// (app.css styles tones, not states), and the badge at `selector`, of state
// `name` of table `kind`, has its tone's colour.
async function checkTones(page, selector, kind, name) {
  const result = await page.evaluate(async ([selector, kind, name]) => {
    const info = await (await fetch('/api/info', { credentials: 'same-origin' })).json();
    const colourOf = (cls) => {
      const span = document.createElement('span');
      span.className = cls;
      document.body.appendChild(span);
      const c = getComputedStyle(span).backgroundColor;
      span.remove();
      return c;
    };
    const bad = [], byTone = {};
    for (const k of ['trial', 'sweep', 'agent']) {
      for (const s of info[k + '_states'] || []) {
        if (!s.tone) { bad.push(`${k} state ${s.name} has no tone`); continue; }
        const c = colourOf('state tone-' + s.tone);
        if (c === 'rgba(0, 0, 0, 0)' || c === 'transparent') bad.push(`${k} state ${s.name}: tone ${s.tone} has no colour`);
        if (byTone[s.tone] && byTone[s.tone] !== c) bad.push(`tone ${s.tone} has two colours`);
        byTone[s.tone] = c;
      }
    }
    const colours = Object.values(byTone);
    if (new Set(colours).size !== colours.length) bad.push(`two tones share a colour: ${JSON.stringify(byTone)}`);
    const tone = (info[kind + '_states'] || []).find((s) => s.name === name)?.tone;
    const shown = getComputedStyle(document.querySelector(selector)).backgroundColor;
    if (!tone || shown !== byTone[tone]) bad.push(`the ${kind} ${name} badge is ${shown}, its tone ${tone} is ${byTone[tone]}`);
    return bad;
  }, [selector, kind, name]);
  if (result.length) throw new Error(`state colours: ${result.join('; ')}`);
}

// Sweep 5: the infeasible trial drawn apart on the points charts, the best
// feasible one as best; the imported trial's badge and its filter.
async function checkConstrainedSweep(page) {
  await page.goto(`${server.url}#/sweeps/5`);
  await until('the constrained sweep\'s parallel coordinates', async () =>
    (await page.locator('#parallel svg path.pc-line').count()) === 4);
  const infeasibleLines = await page.locator('#parallel svg path.pc-line.infeasible').evaluateAll((ns) => ns.map((n) => n.dataset.trialId));
  if (JSON.stringify(infeasibleLines) !== '["5001"]') throw new Error(`infeasible parallel lines: ${infeasibleLines}`);
  const bestLine = await page.locator('#parallel svg path.pc-line.best').evaluateAll((ns) => ns.map((n) => n.dataset.trialId));
  if (JSON.stringify(bestLine) !== '["5002"]') throw new Error(`the best line is not the best feasible trial: ${bestLine}`);
  await until('the infeasible dot on the scatter', async () =>
    (await page.locator('.scatters svg circle.infeasible[data-trial-id="5001"]').count()) === 1);
  const title = await page.locator('#parallel svg path.pc-line.infeasible title').textContent();
  if (!title.includes('infeasible: violates mem')) throw new Error(`the infeasible line's title: ${title}`);
  // The imported trial: a badge naming its source, and the filter lists it alone.
  await until('the imported trial\'s badge', async () =>
    (await page.locator('#trials tr.warm-started[data-trial-id="5002"] .imported-tag').count()) === 1);
  const source = await page.locator('#trials tr[data-trial-id="5002"] .imported-tag').getAttribute('title');
  if (source !== IMPORTED_FROM) throw new Error(`the imported badge says ${source}`);
  if (await page.locator('#trials .imported-tag').count() !== 1) throw new Error('a trial that ran here has the imported badge');
  await page.locator('button.chip[data-state="imported"]').click();
  await until('only the imported trial', async () => {
    const ids = await page.locator('#trials tbody tr[data-trial-id]').evaluateAll((ns) => ns.map((n) => n.dataset.trialId));
    return JSON.stringify(ids) === '["5002"]';
  });
  await page.screenshot({ path: path.join(shots, 'constrained-1280.png'), fullPage: true });
}

// Sweep 6: each staleness metric of the parameter-server trials can be the
// learning curves' metric (both trials' curves drawn) and is a column the
// table sorts by.
async function checkStaleness(page) {
  await page.goto(`${server.url}#/sweeps/6`);
  await until('the ps trials', async () => (await page.locator('#trials tbody tr[data-trial-id]').count()) === 2);
  const headers = await page.locator('#trials thead th').allTextContents();
  for (const m of STALENESS) if (!headers.includes(m)) throw new Error(`no ${m} column: ${headers}`);
  for (const m of STALENESS) {
    await page.locator('select[aria-label="curve metric"]').selectOption(m);
    await until(`the curves of ${m}`, async () => (await page.locator('#curves svg path.line').count()) === 2 &&
      (await page.locator('#curves svg text.legend').first().textContent()) === m);
  }
  await page.locator('#trials th[data-sort="metric:staleness_max"]').click();
  await page.locator('#trials th[data-sort="metric:staleness_max"]').click();
  await until('the trials by staleness_max, highest first', async () => {
    const ids = await page.locator('#trials tbody tr[data-trial-id]').evaluateAll((ns) => ns.map((n) => n.dataset.trialId));
    return JSON.stringify(ids) === '["6001","6000"]';
  });
  await page.screenshot({ path: path.join(shots, 'staleness-1280.png'), fullPage: true });
}

// The real pbt sweep: its population's curves, a mark for every exploit of
// its lineage (member, donor and step as stored), and the best member's
// schedule row by row.
async function checkPbtSweep(page) {
  runPbtSweep();
  pbtServer = await startServer([], pbtDb);
  const exploits = query(pbtDb, 'SELECT trial_id, donor_trial_id, from_step FROM pbt_lineage WHERE donor_trial_id IS NOT NULL ' +
    'ORDER BY trial_id, round').map((r) => r.join(' '));
  if (!exploits.length) throw new Error('the pbt sweep made no exploit: nothing to show');
  const [[best]] = query(pbtDb, "SELECT id FROM trials WHERE state = 'completed' ORDER BY metric_value DESC, id LIMIT 1");
  const schedule = query(pbtDb, `SELECT from_step, json_extract(params, '$.lr'), coalesce(donor_trial_id, '') FROM pbt_lineage
    WHERE trial_id = ${best} ORDER BY round`);
  await page.goto(`${pbtServer.url}?token=${TOKEN}#/sweeps/1`);
  await until('the population panel', () => page.locator('#population-panel').isVisible());
  await until('4 members\' curves', async () => (await page.locator('#population svg path.line').count()) === 4);
  await until('the exploit marks', async () => (await page.locator('#population svg path.exploit-mark').count()) === exploits.length);
  const marks = (await page.locator('#population svg path.exploit-mark').evaluateAll((ns) =>
    ns.map((n) => `${n.dataset.trial} ${n.dataset.donor} ${n.dataset.step}`))).sort();
  if (JSON.stringify(marks) !== JSON.stringify(exploits.slice().sort()))
    throw new Error(`exploit marks ${JSON.stringify(marks)}, the lineage has ${JSON.stringify(exploits)}`);
  if (await page.locator('#population svg path.exploit-link').count() !== exploits.length)
    throw new Error('an exploit has no link from the member it copied');
  const [m, d, st] = exploits[0].split(' ');
  const markTitle = await page.locator(`#population svg path.exploit-mark[data-trial="${m}"][data-step="${st}"] title`).textContent();
  if (!markTitle.includes(`#${m} resumed from #${d}'s checkpoint`) || !markTitle.includes('lr: '))
    throw new Error(`the exploit's title: ${markTitle}`);
  // The schedule: the best member's rounds, each from its step with its lr and source.
  await until('the best member\'s schedule', async () => (await page.locator('#schedule tbody tr[data-round]').count()) === schedule.length);
  const heading = await page.locator('#population-panel h2').nth(1).textContent();
  if (!heading.includes(`#${best}`)) throw new Error(`the schedule is not the best member's (#${best}): ${heading}`);
  const rows = await page.locator('#schedule tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
  const lrColumn = (await page.locator('#schedule thead th').allTextContents()).indexOf('lr');
  schedule.forEach(([from, lr, donor], i) => {
    const row = rows[i];
    if (row[0] !== from || Number(row[lrColumn]) !== Number(lr) || (donor && !row.join(' ').includes(`copied from #${donor}`)))
      throw new Error(`schedule row ${i}: ${JSON.stringify(row)}, the lineage says from ${from} lr ${lr} donor ${donor}`);
  });
  await page.screenshot({ path: path.join(shots, 'pbt-1280.png'), fullPage: true });
  // The member's own page: the same schedule.
  await page.goto(`${pbtServer.url}#/trials/${best}`);
  await until('the member page\'s schedule', async () =>
    (await page.locator('#trial-schedule tbody tr[data-round]').count()) === schedule.length);
  const own = await page.locator('#trial-schedule tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
  if (JSON.stringify(own) !== JSON.stringify(rows)) throw new Error(`the member page's schedule ${JSON.stringify(own)} is not ${JSON.stringify(rows)}`);
  console.log(`browser test: the pbt sweep shows ${exploits.length} exploits and member #${best}'s schedule`);
}

async function until(what, fn, ms = 20000) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what} (last: ${last})`);
}

function startServer(extra = [], file = db) {
  return new Promise((resolve, reject) => {
    const child = spawn(swept, ['web', '--db', file, '--listen', '127.0.0.1:0', '--token', TOKEN, ...extra],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    const timer = setTimeout(() => reject(new Error('swept web did not print its address within 15 s')), 15000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/serving (https?:\/\/\S+)/);
      if (m) { clearTimeout(timer); resolve({ child, url: m[1] }); }
    });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`swept web exited with ${code}`)); });
  });
}

let server, tlsServer, pbtServer, context, tlsContext, failed = false;
try {
  sql(fixture());
  server = await startServer();
  console.log(`browser test: ${server.url} over ${db}`);
  const profile = mkdtempSync(path.join(tmpdir(), 'swept-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run'],
    viewport: { width: 1280, height: 900 },
  });
  const page = context.pages()[0] || await context.newPage();
  const problems = [];
  page.on('dialog', (d) => { problems.push(`a dialog opened: ${d.message()}`); d.dismiss(); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));

  // The token once in the URL; the server answers with a cookie and a redirect.
  await page.goto(`${server.url}?token=${TOKEN}`);
  await until('the sweeps list', () => page.locator('tr[data-sweep-id="1"]').count());
  const sweepName = await page.locator('tr[data-sweep-id="1"] td:nth-child(2)').textContent();
  if (!sweepName.includes('<script>')) throw new Error(`sweep name not shown as text: ${sweepName}`);
  await page.screenshot({ path: path.join(shots, 'sweeps-1280.png'), fullPage: true });

  await page.goto(`${server.url}#/sweeps/1`);
  await until(`${TRIALS} trial rows`, async () => (await page.locator('#trials tbody tr[data-trial-id]').count()) === TRIALS);
  await until('learning curves', () => page.locator('#curves svg path.line').count());
  await until('parallel coordinates', () => page.locator('#parallel svg path.pc-line').count());
  await until('scatter dots', () => page.locator('.scatters svg circle').count());
  // The optimisation history: one dot per completed trial with a value (the
  // running ones do not count for best) and the best-so-far staircase, by
  // trial index and, after the toggle, by time.
  const COMPLETED = TRIALS - 2;
  const historyDots = () => page.locator('#history svg circle.hist-dot').count();
  await until(`${COMPLETED} history dots by trial`, async () => (await historyDots()) === COMPLETED &&
    (await page.locator('#history svg path.hist-best').count()) === 1);
  if (await page.locator('#history svg circle.hist-dot.best').count() !== 1) throw new Error('the best trial is not marked in the history');
  await page.locator('button[data-history-mode="time"]').click();
  await until(`${COMPLETED} history dots by time`, async () => (await historyDots()) === COMPLETED &&
    (await page.locator('#history .hist-xlabel').textContent()).includes('seconds'));
  await page.locator('button[data-history-mode="index"]').click();
  await until('the history by trial again', async () => (await page.locator('#history .hist-xlabel').textContent()) === 'trial index');
  const headers = await page.locator('#trials thead th').allTextContents();
  if (!headers.includes(XSS)) throw new Error(`hostile parameter/metric name not a column header as text: ${headers}`);
  if (await page.locator('#trials tr.best').count() !== 1) throw new Error('the best trial is not highlighted');
  await page.screenshot({ path: path.join(shots, 'sweep-1280.png'), fullPage: true });

  // Live update: a new trial and new metrics written while the page is open.
  sql(`BEGIN;\n${trialSql(TRIALS, 'running', 80)}UPDATE sweeps SET next_index = ${TRIALS + 1} WHERE id = 1;\nCOMMIT;\n`);
  await until('the new trial to appear live', () => page.locator(`#trials tr[data-trial-id="${1000 + TRIALS}"]`).count());
  console.log('browser test: the inserted trial appeared without a reload');

  await page.setViewportSize({ width: 1920, height: 1080 });
  await page.waitForTimeout(600); // let the resize handler redraw (throttled to 300 ms) before the screenshot
  await page.screenshot({ path: path.join(shots, 'sweep-1920.png'), fullPage: true });

  // A metric that no trial reports: the warning names what they did report.
  await page.goto(`${server.url}#/sweeps/2`);
  await until('the missing-metric warning', async () => {
    const w = page.locator('#metric-warning');
    return (await w.isVisible()) && (await w.textContent()).includes('val_loss') && (await w.textContent()).includes('reported loss');
  });
  await page.goto(`${server.url}#/sweeps/1`);
  await until('sweep 1 again', async () => (await page.locator('#trials tbody tr[data-trial-id]').count()) > 0);
  if (await page.locator('#metric-warning').isVisible()) throw new Error('a sweep whose metric is reported shows the warning');

  // An early-stopped trial: its badge in the table, and the stop mark where
  // its learning curve ends (both trials are compared on first load).
  await page.goto(`${server.url}#/sweeps/3`);
  await until('the early-stopped trial\'s row', async () =>
    (await page.locator('#trials tr[data-trial-id="3001"] .state').count()) === 1 &&
    (await page.locator('#trials tr[data-trial-id="3001"] .state').textContent()) === 'early-stopped');
  await checkTones(page, '#trials tr[data-trial-id="3001"] .state', 'trial', 'early_stopped');
  await until('the stop mark on the learning curves', () => page.locator('#curves svg path.stop-mark[data-trial="#3001"]').count());
  if (await page.locator('#curves svg path.stop-mark').count() !== 1) throw new Error('a trial that ran to its end has a stop mark');
  const stopTitle = await page.locator('#curves svg path.stop-mark title').textContent();
  if (!stopTitle.includes('early-stopped at step 20') || !stopTitle.includes(STOP_REASON))
    throw new Error(`the stop mark does not say where and why: ${stopTitle}`);
  await page.screenshot({ path: path.join(shots, 'early-stopped-1920.png'), fullPage: true });

  // Several objectives: the front scatter of two chosen objectives (front
  // points marked, the infeasible trial hollow), parallel coordinates of all
  // three, the front's trials highlighted and the infeasible one tagged in
  // the table, and a summary that gives the front's size and hypervolume.
  await page.goto(`${server.url}#/sweeps/4`);
  await until('the front scatter', async () => (await page.locator('#front svg circle.front-dot').count()) === 5);
  const onFront = async (sel) => (await page.locator(sel).evaluateAll((ns) => ns.map((n) => Number(n.dataset.trialId)))).sort();
  const dots = await onFront('#front svg circle.on-front');
  if (JSON.stringify(dots) !== JSON.stringify(FRONT)) throw new Error(`front dots: ${dots}`);
  const hollow = await onFront('#front svg circle.infeasible');
  if (JSON.stringify(hollow) !== '[4002]') throw new Error(`infeasible dots: ${hollow}`);
  await until('parallel coordinates of the objectives', async () =>
    (await page.locator('#front-parallel svg path.front-pc').count()) === 5 &&
    (await page.locator('#front-parallel svg path.front-pc.on-front').count()) === FRONT.length);
  await page.locator('select[aria-label="front y objective"]').selectOption({ label: 'latency' });
  await until('the scatter against latency', async () =>
    (await page.locator('#front .front-ylabel').textContent()) === 'latency (minimize)');
  await until('the front rows highlighted', async () => (await page.locator('#trials tr.best').count()) === FRONT.length);
  const tagged = await page.locator('#trials tr.infeasible .infeasible-tag').count();
  if (tagged !== 1 || await page.locator('#trials tr[data-trial-id="4002"] .infeasible-tag').count() !== 1)
    throw new Error('the infeasible trial is not tagged in the table');
  const frontSummary = await page.locator('#front-summary').textContent();
  if (!frontSummary.includes('3 trials on the front of 5 (1 infeasible)')) throw new Error(`front summary: ${frontSummary}`);
  if (!(await page.locator('#constraints').textContent()).includes('mem ≤ 8')) throw new Error('constraints not shown');
  await until('importance per objective', async () => (await page.locator('select[aria-label="importance objective"] option').count()) === 3);
  await page.screenshot({ path: path.join(shots, 'front-1280.png'), fullPage: true });
  await page.goto(`${server.url}#/trials/4002`);
  await until('the infeasible trial\'s page says so', async () =>
    (await page.locator('#feasibility').count()) === 1 &&
    (await page.locator('#feasibility').textContent()) === 'infeasible: violates mem');

  await checkConstrainedSweep(page);
  await checkStaleness(page);
  await checkPbtSweep(page);
  await checkBigPopulation(page);

  await page.goto(`${server.url}#/trials/1000`);
  await until('the log tail', () => page.locator('#log').count());
  const log = await page.locator('#log').textContent();
  if (!log.includes(XSS)) throw new Error(`log tail not shown verbatim: ${log}`);
  await until('trial charts', () => page.locator('.scatters svg path.line').count());
  await page.screenshot({ path: path.join(shots, 'trial-1920.png'), fullPage: true });

  await page.goto(`${server.url}#/agents`);
  await until('the agent card', () => page.locator('[data-agent="host-a"] td').count());
  await checkTones(page, '[data-agent="host-a"] h2 .state', 'agent', 'alive');
  await page.screenshot({ path: path.join(shots, 'agents-1920.png'), fullPage: true });

  const xss = await page.evaluate(() => window.__xss);
  if (xss !== undefined) problems.push(`injected script ran (window.__xss = ${xss})`);
  if (await page.locator('img[src="x"]').count()) problems.push('an injected <img> became an element');
  if (problems.length) throw new Error(problems.join('; '));

  // Without the cookie, the API refuses.
  const anon = await fetch(`${server.url}api/sweeps`);
  if (anon.status !== 401) throw new Error(`the API answered ${anon.status} without the token`);

  // The dashboard over HTTPS, in a browser that accepts the self-signed certificate.
  const cert = path.join(scratch, 'web.crt'), key = path.join(scratch, 'web.key');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'],
    { stdio: 'ignore' });
  tlsServer = await startServer(['--tls-cert', cert, '--tls-key', key]);
  if (!tlsServer.url.startsWith('https://')) throw new Error(`swept web with TLS printed ${tlsServer.url}`);
  const tlsProfile = mkdtempSync(path.join(tmpdir(), 'swept-chromium-'));
  tlsContext = await chromium.launchPersistentContext(tlsProfile, {
    executablePath: '/usr/bin/chromium', headless: true, ignoreHTTPSErrors: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run'],
  });
  const tlsPage = tlsContext.pages()[0] || await tlsContext.newPage();
  await tlsPage.goto(`${tlsServer.url}?token=${TOKEN}`);
  await until('the sweeps list over HTTPS', () => tlsPage.locator('tr[data-sweep-id="1"]').count());
  await tlsPage.goto(`${tlsServer.url}#/sweeps/1`);
  await until('trial rows over HTTPS', () => tlsPage.locator('#trials tbody tr[data-trial-id]').count());
  const cookie = (await tlsContext.cookies()).find((c) => c.name === 'swept_token');
  if (!cookie || !cookie.secure) throw new Error(`the token cookie over HTTPS is not Secure: ${JSON.stringify(cookie)}`);
  await tlsPage.screenshot({ path: path.join(shots, 'sweep-https-1280.png'), fullPage: true });
  console.log(`browser test: the dashboard works over HTTPS (${tlsServer.url})`);
  console.log(`browser test: passed; screenshots in ${shots}`);
} catch (e) {
  failed = true;
  console.error(`browser test FAILED: ${e.stack || e}`);
} finally {
  if (context) await context.close().catch(() => {});
  if (tlsContext) await tlsContext.close().catch(() => {});
  if (server) server.child.kill('SIGTERM');
  if (pbtServer) pbtServer.child.kill('SIGTERM');
  if (tlsServer) tlsServer.child.kill('SIGTERM');
  rmSync(scratch, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
