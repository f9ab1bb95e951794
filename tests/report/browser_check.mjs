// Drives the report in headless Chromium (Debian's /usr/bin/chromium via playwright-core; never
// downloads a browser). Usage:
//   node browser_check.mjs --page FULL.html --subset SUBSET.html --fixture DIR --binary ATTNUM --out ARTDIR
// Checks: no console error, no network request; the slider changes the weights and they equal
// `attnum illustrate --json`; one inspector row per heads.csv row; keyboard navigation; filters
// reach the plot; exported files match the result files. Prints "browser_check: all passed".
import { chromium } from 'playwright-core';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
for (const k of ['page', 'subset', 'fixture', 'binary', 'out']) if (!args[k]) { console.error('missing --' + k); process.exit(2); }
fs.mkdirSync(args.out, { recursive: true });

let failures = 0;
function check(ok, what) {
  console.log((ok ? 'ok   ' : 'FAIL ') + what);
  if (!ok) failures++;
}

// Minimal RFC 4180 parser (independent of the page's and the tool's code).
function parseCSV(text) {
  const rows = []; let row = [], cell = '', q = false;
  for (let i = 0; i < text.length; ++i) {
    const c = text[i];
    if (q) { if (c === '"' && text[i + 1] === '"') { cell += '"'; ++i; } else if (c === '"') q = false; else cell += c; }
    else if (c === '"') q = true;
    else if (c === ',') { row.push(cell); cell = ''; }
    else if (c === '\n' || c === '\r') { if (c === '\r' && text[i + 1] === '\n') ++i; row.push(cell); rows.push(row); row = []; cell = ''; }
    else cell += c;
  }
  if (cell !== '' || row.length) { row.push(cell); rows.push(row); }
  const [head, ...body] = rows;
  return { columns: head, rows: body.map((r) => Object.fromEntries(head.map((h, i) => [h, r[i]]))) };
}
// Canonical form of a cell so "0.10", 0.1 and "1"/"true" compare equal where they mean the same.
function canon(v) {
  if (v === null || v === undefined || v === '' || v === 'nan' || v === 'NaN') return '';
  if (v === true || v === 'true' || v === 'True') return 'true';
  if (v === false || v === 'false' || v === 'False') return 'false';
  const n = Number(v);
  if (typeof v !== 'boolean' && String(v).trim() !== '' && Number.isFinite(n)) return 'n:' + n;
  return 's:' + String(v);
}
function sameRows(a, b, columns, label) {
  const key = (r) => columns.map((c) => canon(r[c])).join('\u0001');
  const ka = a.map(key).sort(), kb = b.map(key).sort();
  const same = ka.length === kb.length && ka.every((x, i) => x === kb[i]);
  check(same, `${label}: ${a.length} exported rows equal the ${b.length} rows of the result file`);
}

const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnum-chromium-'));
// A fresh profile each run (playwright passes it as --user-data-dir).
const context = await chromium.launchPersistentContext(userDir, {
  executablePath: process.env.ATTNUM_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  acceptDownloads: true,
  viewport: { width: 1200, height: 900 },
});
try {
  async function open(file) {
    const page = await context.newPage();
    const errors = [], requests = [];
    const url = pathToFileURL(path.resolve(file)).href;
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('request', (r) => { const u = r.url(); if (u !== url && !u.startsWith('data:') && !u.startsWith('blob:')) requests.push(u); });
    await page.goto(url);
    try {
      await page.waitForSelector('body[data-ready="true"]', { state: 'attached', timeout: 60000 });
    } catch (e) {
      console.log('FAIL page did not finish loading: ' + errors.join(' | '));
      throw e;
    }
    return { page, errors, requests };
  }

  // ---------------- the full page ----------------
  const { page, errors, requests } = await open(args.page);
  await page.screenshot({ path: path.join(args.out, 'report-full.png'), fullPage: true });

  // Answer block first, its numbers those of summary.json (read here, not from the page's data).
  const order = await page.evaluate(() => [...document.querySelectorAll('main > section')].map((e) => e.id));
  check(JSON.stringify(order) === JSON.stringify(['s-answer', 's-grid', 's-loss', 's-heads', 's-inspector', 's-pcast', 's-illustration']),
    'sections in order answer, harm grid, loss, heads, inspector, P cast, illustration: ' + order.join(','));
  const summaryRows = JSON.parse(fs.readFileSync(path.join(args.fixture, 'summary.json'), 'utf8'));
  const answers = await page.evaluate(() => [...document.querySelectorAll('#answer-list > li.answer')].map((e) => ({ ...e.dataset, text: e.textContent })));
  check(answers.length === summaryRows.length, `one answer line per summary.json row (${answers.length} vs ${summaryRows.length})`);
  let answerOk = answers.length === summaryRows.length;
  summaryRows.forEach((s, i) => {
    const a = answers[i] || {};
    const sign = s.n_harmed_sign !== undefined ? s.n_harmed_sign : s.n_harmed;
    const same = (x, y) => (y === null || y === undefined) ? x === undefined : Number(x) === y;
    const ok = a.kernel === s.kernel && a.transform === s.transform && same(a.nHeads, s.n_heads) &&
      same(a.nHarmedSign, sign) && same(a.nLabelHarmed, s.n_label_harmed) && same(a.auc, s.auc) &&
      same(a.aucLo, s.auc_lo) && same(a.aucHi, s.auc_hi) &&
      (s.auc === null || a.text.includes(`AUC ${s.auc.toFixed(2)} [${s.auc_lo.toFixed(2)}, ${s.auc_hi.toFixed(2)}]`)) &&
      a.text.includes(`${sign} of ${s.n_heads} heads`);
    if (!ok) console.log('  answer line ' + i + ': ' + JSON.stringify(a) + ' vs ' + JSON.stringify(s));
    answerOk = answerOk && ok;
  });
  check(answerOk, 'answer lines carry summary.json\'s counts and AUC with its interval');
  const lossRows = JSON.parse(fs.readFileSync(path.join(args.fixture, 'loss.json'), 'utf8'));
  const answerLoss = await page.evaluate(() => [...document.querySelectorAll('li.answer-loss')].map((e) => ({ ...e.dataset })));
  const shown = lossRows.filter((l) => summaryRows.some((s) => s.kernel === l.kernel && s.transform === l.condition));
  check(answerLoss.length === shown.length && shown.every((l, i) => Number(answerLoss[i].pplRatio) === l.ppl_ratio &&
    Number(answerLoss[i].pplRatioLo) === l.ppl_ratio_lo && Number(answerLoss[i].pplRatioHi) === l.ppl_ratio_hi),
    `answer loss lines carry loss.json's ratios and intervals (${answerLoss.length} lines)`);

  // Layout at 1,280 px: no element reaches past the viewport, except inside a box that scrolls.
  await page.setViewportSize({ width: 1280, height: 900 });
  const wide = await page.evaluate(() => {
    const W = document.documentElement.clientWidth, out = [];
    const scrolls = (e) => { for (let p = e.parentElement; p; p = p.parentElement) { const o = getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll' || o === 'hidden') return true; } return false; };
    for (const e of document.querySelectorAll('body *')) {
      const r = e.getBoundingClientRect();
      if (r.width > 0 && r.right > W + 0.5 && !scrolls(e)) out.push((e.id || e.tagName) + ':' + Math.round(r.right));
    }
    return { W, scrollW: document.documentElement.scrollWidth, out: out.slice(0, 10) };
  });
  check(wide.out.length === 0 && wide.scrollW <= wide.W, `nothing wider than the viewport at 1280 px (page ${wide.scrollW} px; ${wide.out.join(' ')})`);
  for (const id of order) await page.locator('#' + id).screenshot({ path: path.join(args.out, 'section-' + id + '.png') });
  await page.screenshot({ path: path.join(args.out, 'report-top-1280.png') });
  await page.setViewportSize({ width: 1200, height: 900 });

  // Illustration: weights at several slider positions equal `attnum illustrate`.
  const commons = await page.evaluate(() => window.attnumReport.data.illustration.commons);
  const readWeights = () => page.evaluate(() => {
    const get = (sel) => [...document.querySelectorAll(sel)].map((e) => Number(e.dataset.value));
    return { exact: get('#ill-weights td.w-exact'), fp8: get('#ill-weights td.w-fp8'), rot: get('#ill-weights td.w-fp8-rot'),
      tv: Number(document.getElementById('ill-tv-fp8').dataset.value), tvr: Number(document.getElementById('ill-tv-rot').dataset.value),
      label: document.getElementById('ill-common-value').textContent };
  });
  const setSlider = (i, center) => page.evaluate(([i, center]) => {
    const s = document.getElementById('ill-common'), c = document.getElementById('ill-center');
    if (c.checked !== center) { c.checked = center; c.dispatchEvent(new Event('change')); }
    s.value = String(i); s.dispatchEvent(new Event('input'));
  }, [i, center]);
  let allMatch = true, tested = 0;
  const seen = [];
  for (const center of [false, true]) {
    for (const i of [0, 5, 25, 50, commons.length - 1]) {
      await setSlider(i, center);
      const w = await readWeights();
      const cli = JSON.parse(execFileSync(args.binary, ['illustrate', '--common', String(commons[i]), '--json', ...(center ? ['--center'] : [])]).toString());
      const keys = cli.filter((r) => r.vector !== 'q');
      const ok = keys.length === 4 && keys.every((r, j) => r.w_exact === w.exact[j] && r.w_fp8 === w.fp8[j] && r.w_fp8_rot === w.rot[j]) &&
        keys[0].tv_fp8 === w.tv && keys[0].tv_fp8_rot === w.tvr;
      if (!ok) { allMatch = false; console.log('mismatch at', commons[i], center, JSON.stringify(w), JSON.stringify(keys.map((r) => [r.w_exact, r.w_fp8, r.w_fp8_rot]))); }
      seen.push({ center, i, w });
      tested++;
    }
  }
  check(allMatch, `illustration weights equal \`attnum illustrate --json\` at ${tested} slider positions (bit-exact)`);
  const p0 = seen[0].w, pBig = seen[4].w;
  check(p0.rot.some((x, j) => x !== pBig.rot[j]), 'moving the slider changes the FP8-with-rotation weights');
  check(p0.exact.every((x, j) => Math.abs(x - pBig.exact[j]) < 1e-12), 'exact weights stay fixed along the slider');
  // Keyboard on the slider itself.
  await setSlider(0, false);
  await page.focus('#ill-common');
  for (let k = 0; k < 10; ++k) await page.keyboard.press('ArrowRight');
  const kb = await readWeights();
  const cli10 = JSON.parse(execFileSync(args.binary, ['illustrate', '--common', String(commons[10]), '--json']).toString()).filter((r) => r.vector !== 'q');
  check(kb.rot.every((x, j) => x === cli10[j].w_fp8_rot), `arrow keys on the slider reach position 10 (common ${commons[10]}) with matching weights`);
  await setSlider(commons.indexOf(200), false);
  await page.locator('#s-illustration').screenshot({ path: path.join(args.out, 'illustration-200.png') });
  await page.evaluate(() => { document.querySelector('#s-illustration details').open = true; });
  await setSlider(commons.indexOf(200), true);
  await page.locator('#s-illustration').screenshot({ path: path.join(args.out, 'illustration-200-center.png') });

  const heads = parseCSV(fs.readFileSync(path.join(args.fixture, 'heads.csv'), 'utf8'));
  const rowsCsv = parseCSV(fs.readFileSync(path.join(args.fixture, 'rows.csv'), 'utf8'));
  // Scatter and grid start with one kernel and one transform: summary.json's first row's.
  const firstSel = heads.rows.filter((r) => r.kernel === summaryRows[0].kernel && r.transform === summaryRows[0].transform);
  const selects = await page.evaluate(() => ['f-kernel', 'f-transform', 'g-kernel', 'g-transform'].map((id) => document.getElementById(id).value));
  const plot0 = await page.evaluate(() => window.attnumReport.views.heads.data('pts').length);
  check(selects.join(',') === [summaryRows[0].kernel, summaryRows[0].transform, summaryRows[0].kernel, summaryRows[0].transform].join(',') &&
    plot0 === firstSel.length && firstSel.length < heads.rows.length,
    `scatter starts with ${selects[0]}, ${selects[1]}: ${plot0} of ${heads.rows.length} points (${firstSel.length} expected)`);
  // Harm grid: one cell per head of the selection, null heads and predicted calls marked.
  const gridCells = () => page.$$eval('#grid-list .hg-cell', (cs) => cs.map((c) => ({ row: Number(c.dataset.row),
    nul: c.classList.contains('label-null'), pred: c.classList.contains('pred') })));
  let cells = await gridCells();
  check(cells.length === firstSel.length && cells.filter((c) => c.nul).length === firstSel.filter((r) => r.label === 'null').length &&
    cells.filter((c) => c.pred).length === firstSel.filter((r) => Number(r.predicted_score) > 0).length,
    `harm grid: ${cells.length} cells for ${firstSel.length} heads of the first selection, nulls and predicted calls marked`);
  const nGrids = await page.locator('#grid-list figure.hg').count();
  check(nGrids === new Set(firstSel.map((r) => r.model)).size, `one grid per model for the first selection (${nGrids})`);
  await page.locator('#s-grid').screenshot({ path: path.join(args.out, 'grid-first.png') });
  await page.selectOption('#g-transform', '');
  cells = await gridCells();
  const nFig = await page.locator('#grid-list figure.hg').count();
  check(cells.length === heads.rows.length && new Set(cells.map((c) => c.row)).size === heads.rows.length &&
    nFig === new Set(heads.rows.map((r) => r.model + '|' + r.kernel + '|' + r.transform)).size,
    `harm grid with every transform: ${cells.length} cells for ${heads.rows.length} heads.csv rows, ${nFig} grids`);
  const figOrder = await page.$$eval('#grid-list figure.hg', (fs) => fs.map((f) => f.dataset.kernel + '|' + f.dataset.transform + '|' + f.dataset.model));
  check(figOrder[0] === summaryRows[0].kernel + '|' + summaryRows[0].transform + '|toy-a' && figOrder[1] === summaryRows[0].kernel + '|' + summaryRows[0].transform + '|toy-b' &&
    figOrder[2].startsWith(summaryRows[1].kernel + '|' + summaryRows[1].transform + '|'), `grids in summary.json's order, then by model (${figOrder.slice(0, 3).join(', ')})`);
  // Loss plots: one point per loss.json row and per loss_paired row.
  const lossN = await page.evaluate(() => { const v = window.attnumReport.views; return [v.loss ? v.loss.data('d').length : -1, v.lossPaired ? v.lossPaired.data('d').length : -1]; });
  check(lossN[0] === lossRows.length && lossN[1] === 2, `loss plot draws ${lossN[0]} ratios (loss.json: ${lossRows.length}) and ${lossN[1]} paired differences (2)`);
  const lossCanvas = await page.locator('#loss-plot canvas, #loss-paired-plot canvas').count();
  check(lossCanvas === 2, `loss and paired plots are drawn (${lossCanvas} canvases)`);
  // Provenance: a table, one row per meta.json, the raw JSON behind a click.
  const prov = await page.evaluate(() => ({ rows: document.querySelectorAll('#provenance-table tbody tr').length,
    raw: document.querySelector('#provenance-raw pre') ? document.querySelector('#provenance-raw pre').textContent : '',
    open: document.querySelector('#provenance-raw') ? document.querySelector('#provenance-raw').open : null }));
  const metaJson = JSON.parse(fs.readFileSync(path.join(args.fixture, 'meta.json'), 'utf8'));
  const sorted = (v) => Array.isArray(v) ? v.map(sorted) : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])])) : v;
  check(prov.rows === 1 && prov.open === false && prov.raw !== '' && JSON.stringify(sorted(JSON.parse(prov.raw))) === JSON.stringify(sorted(metaJson)),
    `provenance table has ${prov.rows} row, raw meta.json one click away`);
  await page.selectOption('#f-kernel', '');
  await page.selectOption('#f-transform', '');

  // Inspector: one row per heads.csv row, ordered by observed score.
  const nRows = await page.locator('#inspector tbody tr').count();
  check(nRows === heads.rows.length, `inspector has ${nRows} rows, heads.csv has ${heads.rows.length}`);
  const obs = await page.$$eval('#inspector tbody td.obs', (tds) => tds.map((t) => Number(t.dataset.value)));
  check(obs.every((x, i) => i === 0 || obs[i - 1] >= x), 'inspector rows are ordered by observed score, largest first');
  // One number format per column: every cell of a numeric column has the same number of decimals.
  const fmts = await page.evaluate(() => [7, 8].map((c) => [...document.querySelectorAll('#inspector tbody tr td:nth-child(' + c + ')')]
    .map((td) => td.textContent.includes('e') ? 'e' : (td.textContent.split('.')[1] || '').length)));
  check(fmts.every((col) => col.length === nRows && col.every((x) => x === col[0])), `inspector score columns have one format each (${fmts.map((c) => c[0]).join(', ')})`);
  const plotN = await page.evaluate(() => window.attnumReport.views.heads.data('pts').length);
  check(plotN === heads.rows.length, `plot shows ${plotN} points with no filter`);
  // Null heads are their own class in the plot; the summary names each interval's method,
  // cluster count and the predictor model; the paired loss table is shown.
  const nNull = await page.evaluate(() => window.attnumReport.views.heads.data('pts').filter((p) => p.harm === 'null').length);
  const wantNull = heads.rows.filter((r) => r.label === 'null').length;
  check(wantNull > 0 && nNull === wantNull, `plot draws ${nNull} null heads as their own class (heads.csv: ${wantNull})`);
  const methods = await page.$$eval('#summary td.ci-method', (tds) => tds.map((t) => t.textContent));
  check(methods.length > 0 && methods[0].includes('jackknife-t') && methods[0].includes('2 models'),
    `summary names the interval method and cluster count (${methods[0]})`);
  const summaryText = await page.textContent('#summary');
  check(summaryText.includes('fixed: fa3') && summaryText.includes('kernel-aware'), 'summary names the predictor model');
  const pairedRows = await page.locator('#loss-paired tbody tr').count();
  check(pairedRows === 2, `paired loss table has ${pairedRows} rows (loss_paired.csv has 2)`);
  const pairedNa = await page.$$eval('#loss-paired span.na', (s) => s.map((e) => [e.textContent, e.title]));
  check(pairedNa.length === 1 && pairedNa[0][0] === '[n/a]' && pairedNa[0][1] === 'zero width',
    `an interval without bounds reads [n/a] with its reason (${JSON.stringify(pairedNa)})`);

  // Keyboard: focus, down x3, up x1, Enter.
  await page.focus('#inspector-wrap');
  for (let k = 0; k < 3; ++k) await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowUp');
  const selId = await page.$eval('#inspector tbody tr.sel', (tr) => tr.id);
  check(selId === 'head-row-2', `arrow keys move the selection (selected ${selId}, expected head-row-2)`);
  await page.keyboard.press('Enter');
  const title = await page.textContent('#detail-title').catch(() => '');
  const selKey = await page.$eval('#inspector tbody tr.sel', (tr) => tr.dataset.key);
  const [model, layer, head, kernel] = selKey.split('|');
  check(title.includes(model) && title.includes('layer ' + layer) && title.includes('head ' + head), `Enter opens the selected head (${title})`);
  // Its per-text errors and exp(mean log1p) - 1, recomputed here from rows.csv.
  const mine = rowsCsv.rows.filter((r) => r.model === model && r.layer === layer && r.head === head && r.kernel === kernel);
  const detail = await page.$$eval('#detail-table tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.dataset.value ?? td.textContent)));
  const conds = ['plain', 'rotate', 'center', 'center+rotate'];
  let detailOk = detail.length === 4; // three texts + the summary row
  for (const [ci, c] of conds.entries()) {
    const rs = mine.filter((r) => r.condition === c);
    const geo = Math.expm1(rs.reduce((s, r) => s + Math.log1p(Number(r.rel_err)), 0) / rs.length);
    detailOk = detailOk && Math.abs(Number(detail[3][1 + 2 * ci]) - geo) <= 1e-12 * geo;
    for (const [ti, r] of rs.entries()) detailOk = detailOk && Number(detail[ti][1 + 2 * ci]) === Number(r.rel_err);
  }
  check(detailOk, 'head detail shows the per-text errors of rows.csv and exp(mean log error) - 1');
  await page.locator('#head-detail').screenshot({ path: path.join(args.out, 'head-detail.png') });
  await page.keyboard.press('End');
  const last = await page.$eval('#inspector tbody tr.sel', (tr) => tr.id);
  check(last === `head-row-${nRows - 1}`, 'End moves to the last row');

  // Filters reach table and plot.
  await page.selectOption('#f-model', 'toy-b');
  await page.selectOption('#f-transform', 'rotate');
  await page.waitForFunction(() => window.attnumReport.views.heads.data('pts').length > 0);
  const want = heads.rows.filter((r) => r.model === 'toy-b' && r.transform === 'rotate').length;
  const gotRows = await page.locator('#inspector tbody tr').count();
  const gotPts = await page.evaluate(() => window.attnumReport.views.heads.data('pts').length);
  check(gotRows === want && gotPts === want, `filters model=toy-b transform=rotate: ${gotRows} rows, ${gotPts} points, expected ${want}`);
  await page.locator('#s-heads').screenshot({ path: path.join(args.out, 'heads-filtered.png') });
  await page.selectOption('#f-model', '');
  await page.selectOption('#f-transform', '');

  // Exports.
  async function exported(id) {
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#' + id)]);
    const file = path.join(args.out, 'export-' + dl.suggestedFilename());
    await dl.saveAs(file);
    return fs.readFileSync(file, 'utf8');
  }
  const hcsv = parseCSV(await exported('export-heads-csv'));
  check(hcsv.columns.join(',') === heads.columns.join(','), 'heads CSV export keeps the columns of heads.csv');
  sameRows(hcsv.rows, heads.rows, heads.columns, 'heads CSV export');
  const hjson = JSON.parse(await exported('export-heads-json'));
  sameRows(hjson, heads.rows, heads.columns, 'heads JSON export');
  for (const [id, file] of [['export-pcast_theory-csv', 'pcast_theory.csv'], ['export-pcast_simulate-csv', 'pcast_simulate.csv'],
    ['export-pcast_dp-csv', 'pcast_dp.csv'], ['export-loss-csv', 'loss.csv']]) {
    const ref = parseCSV(fs.readFileSync(path.join(args.fixture, file), 'utf8'));
    sameRows(parseCSV(await exported(id)).rows, ref.rows, ref.columns, id);
  }
  const sum = JSON.parse(fs.readFileSync(path.join(args.fixture, 'summary.json'), 'utf8'));
  sameRows(JSON.parse(await exported('export-summary-json')), sum, Object.keys(sum[0]), 'summary JSON export');
  const ill = parseCSV(await exported('export-illustration-weights-csv'));
  check(ill.rows.length === 4, 'illustration weights export has one row per key');
  await page.focus('#inspector-wrap');
  await page.keyboard.press('Home');
  await page.keyboard.press('Enter');
  const det = parseCSV(await exported('export-head-detail-csv'));
  check(det.rows.length === 16, `head detail export has ${det.rows.length} rows (3 texts + summary, 4 conditions)`);

  // Clicking a grid cell selects that head's inspector row (and opens it).
  await page.selectOption('#g-kernel', '');
  await page.selectOption('#g-transform', '');
  const target = heads.rows.findIndex((r) => r.model === 'toy-b' && r.layer === '1' && r.head === '2' && r.transform === 'center');
  const cellIdx = await page.evaluate((t) => {
    const h = window.attnumReport.data.heads.rows, want = window.attnumReport.data.heads.rows.find((r) =>
      r.model === t.model && String(r.layer) === t.layer && String(r.head) === t.head && r.transform === t.transform);
    return h.indexOf(want);
  }, heads.rows[target]);
  const t = heads.rows[target];
  await page.click(`#grid-list .hg-cell[data-row="${cellIdx}"]`);
  await page.waitForFunction((k) => { const tr = document.querySelector('#inspector tbody tr.sel'), d = document.getElementById('detail-title');
    return tr && tr.dataset.key === k && d && d.textContent.includes('layer 1, head 2') && d.textContent.includes('center'); },
  [t.model, t.layer, t.head, t.kernel].join('|'), { timeout: 10000 }).catch(() => {});
  const picked = await page.$eval('#inspector tbody tr.sel', (tr) => ({ key: tr.dataset.key, transform: tr.children[5].textContent }));
  check(target >= 0 && picked.key === [t.model, t.layer, t.head, t.kernel].join('|') && picked.transform === t.transform &&
    (await page.textContent('#detail-title')).includes('layer 1, head 2'),
    `clicking the grid cell of toy-b layer 1 head 2 (center) selects its inspector row (${picked.key}, ${picked.transform})`);
  await page.locator('#s-grid').screenshot({ path: path.join(args.out, 'grid-all.png') });

  check(errors.length === 0, 'no console error on the full page' + (errors.length ? ': ' + errors.join(' | ') : ''));
  check(requests.length === 0, 'no network request from the full page' + (requests.length ? ': ' + requests.join(' ') : ''));

  // ---------------- a page from a P-cast folder only ----------------
  const sub = await open(args.subset);
  await sub.page.screenshot({ path: path.join(args.out, 'report-pcast-only.png'), fullPage: true });
  const absent = await sub.page.textContent('#heads-absent');
  check(absent.includes('No heads.csv'), 'a P-cast-only page says that heads are absent');
  const subLoss = await sub.page.evaluate(() => [window.attnumReport.views.loss === undefined, document.querySelectorAll('#grid-list .hg-cell').length,
    document.getElementById('loss-absent').textContent]);
  check(subLoss[0] && subLoss[1] === 0 && subLoss[2].includes('No loss.json'), 'a page without loss.json and heads.csv has no loss plot and no grid, and says why');
  check(sub.errors.length === 0, 'no console error on the P-cast-only page' + (sub.errors.length ? ': ' + sub.errors.join(' | ') : ''));
  check(sub.requests.length === 0, 'no network request from the P-cast-only page');
} finally {
  await context.close();
  fs.rmSync(userDir, { recursive: true, force: true });
}
console.log(failures ? `browser_check: ${failures} check(s) failed` : 'browser_check: all passed');
process.exit(failures ? 1 : 0);
