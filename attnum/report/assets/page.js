'use strict';
(function () {
  const DATA = JSON.parse(document.getElementById('attnum-data').textContent);
  const $ = (id) => document.getElementById(id);
  const EMBED = { actions: false, renderer: 'canvas' };
  const COND_ORDER = ['plain', 'rotate', 'center', 'center+rotate'];
  window.attnumReport = { data: DATA, ready: false, views: {} };

  function esc(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  }
  function num(x, d) {
    if (x === null || x === undefined || x === '') return '—';
    if (typeof x !== 'number') return esc(x);
    if (d === undefined) d = 4;
    if (typeof d === 'function') return d(x);
    return x.toFixed(d);
  }
  // One number format for a whole column (docs/report.md): `sig` significant digits for the
  // column's largest magnitude, the same number of decimals in every cell; scientific notation
  // with sig digits for every cell when that magnitude is below 1e-4 or from 1e5 on.
  function colFormat(values, sig) {
    let m = 0;
    for (const v of values) if (typeof v === 'number' && Number.isFinite(v)) m = Math.max(m, Math.abs(v));
    if (m !== 0 && (m < 1e-4 || m >= 1e5)) return (x) => x.toExponential(sig - 1);
    const dec = m === 0 ? sig - 1 : Math.min(8, Math.max(0, sig - 1 - Math.floor(Math.log10(m))));
    return (x) => x.toFixed(dec);
  }
  const column = (rows, ...keys) => rows.flatMap((r) => keys.map((k) => r[k]));
  function cell(x, d, cls) {
    const v = typeof x === 'number' ? ' data-value="' + String(x) + '"' : '';
    return '<td' + (cls ? ' class="' + cls + '"' : '') + v + '>' + num(x, d) + '</td>';
  }
  function interval(v, lo, hi, d, suffix) {
    if (v === null || v === undefined) return '—';
    let s = num(v, d) + (suffix || '');
    if (typeof lo === 'number' && typeof hi === 'number') s += ' [' + num(lo, d) + ', ' + num(hi, d) + ']';
    return s;
  }
  // A loss statistic with its interval, or "[n/a]" (the row's <stat>_ci_reason as the tooltip)
  // where the row records the interval as not available (null bounds).
  function lossInterval(r, stat, d, suffix) {
    const lo = r[stat + '_lo'], hi = r[stat + '_hi'];
    if (r[stat] === null || r[stat] === undefined || (typeof lo === 'number' && typeof hi === 'number') || !(stat + '_lo' in r))
      return interval(r[stat], lo, hi, d, suffix);
    const why = r[stat + '_ci_reason'];
    return num(r[stat], d) + (suffix || '') + ' <span class="na"' + (why ? ' title="' + esc(String(why)) + '"' : '') + '>[n/a]</span>';
  }

  // ---- export -------------------------------------------------------------------------------
  function toCSV(t) {
    const q = (v) => {
      if (v === null || v === undefined) return '';
      const s = typeof v === 'object' ? JSON.stringify(v) : String(v);
      return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
    };
    const lines = [t.columns.map(q).join(',')];
    for (const r of t.rows) lines.push(t.columns.map((c) => q(r[c])).join(','));
    return lines.join('\n') + '\n';
  }
  function toJSON(t) {
    return JSON.stringify(t.rows.map((r) => {
      const o = {};
      for (const c of t.columns) o[c] = r[c] === undefined ? null : r[c];
      return o;
    }), null, 1) + '\n';
  }
  function download(name, text, type) {
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([text], { type: type }));
    a.download = name;
    document.body.appendChild(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  }
  // Adds "CSV" and "JSON" buttons for a table produced on demand by get().
  function addExports(containerId, name, label, get) {
    const box = $(containerId);
    if (!box) return;
    const span = document.createElement('span');
    span.textContent = label + ':';
    box.appendChild(span);
    for (const kind of ['csv', 'json']) {
      const b = document.createElement('button');
      b.type = 'button';
      b.id = 'export-' + name + '-' + kind;
      b.textContent = kind.toUpperCase();
      b.addEventListener('click', () => {
        const t = get();
        if (kind === 'csv') download(name + '.csv', toCSV(t), 'text/csv');
        else download(name + '.json', toJSON(t), 'application/json');
      });
      box.appendChild(b);
    }
  }
  function replaceData(view, name, rows) {
    return view.change(name, vega.changeset().remove(() => true).insert(rows)).runAsync();
  }

  // ---- header -------------------------------------------------------------------------------
  // A folder's inputs with short hashes: the source's files (model, text, file, hash) where
  // meta.json lists them, else the source's name.
  function inputsOf(meta) {
    const src = meta.source;
    if (src === undefined || src === null) return '';
    const list = Array.isArray(src) ? src : Array.isArray(src.inputs) ? src.inputs : Array.isArray(src.files) ? src.files : null;
    if (src === 'zoo' && meta.zoo) return 'synthetic zoo (' + Object.entries(meta.zoo).map(([k, v]) => esc(k) + ' ' + esc(v)).join(', ') + ')';
    if (!list) return esc(typeof src === 'object' ? JSON.stringify(src) : src);
    // Each file by its name (the full path in its tooltip) and the first 8 hex digits of its hash;
    // past four files, the rest behind a disclosure.
    const items = list.map((f) => {
      const hash = f.fnv1a64 ?? f.sha256 ?? f.hash ?? f.fnv1a, file = f.file ?? f.path;
      const base = file === undefined || file === null ? '' : String(file).split('/').pop();
      const name = [f.model, base].filter((x) => x !== undefined && x !== null && x !== '').join(', ');
      return '<span class="input"' + (file ? ' title="' + esc(file) + '"' : '') + '>' + esc(name || JSON.stringify(f)) + '</span>' +
        (hash ? ' <code>' + esc(String(hash).slice(0, 8)) + '</code>' : '');
    });
    if (items.length <= 4) return items.join('<br>');
    return items.slice(0, 3).join('<br>') + '<details><summary>' + (items.length - 3) + ' more</summary>' + items.slice(3).join('<br>') + '</details>';
  }
  function renderProvenance() {
    let h = '<p class="note">Report written by attnum ' + esc(DATA.tool_version) + ' from: ' +
      DATA.dirs.map((d) => '<code>' + esc(d) + '</code>').join(', ') + '.</p>';
    if (DATA.meta.length) {
      h += '<div class="scroll"><table id="provenance-table"><thead><tr><th class="l">Folder</th><th class="l">Tool version</th>' +
        '<th class="l">Commit</th><th class="l">Date (UTC)</th><th class="l">Command</th><th class="l">CPU / ISA path</th>' +
        '<th class="l">Inputs</th></tr></thead><tbody>' + DATA.meta.map((m) => {
          const meta = m.meta || {}, run = meta.run || {};
          const td = (x) => '<td>' + (x === undefined || x === null || x === '' ? '—' : x) + '</td>';
          const isa = run.isa_paths && typeof run.isa_paths === 'object' ? run.isa_paths.isa : undefined;
          const cpu = [run.cpu_model, isa ? 'ISA path ' + isa : undefined, run.threads ? run.threads + ' threads' : undefined].filter((x) => x !== undefined);
          return '<tr>' + td('<code>' + esc(m.dir) + '</code>') + td(esc(run.tool_version ?? meta.tool_version ?? '')) +
            td(run.git_commit ? '<code>' + esc(String(run.git_commit).slice(0, 12)) + '</code>' : '') + td(esc(run.utc_time ?? '')) +
            td(esc(run.command_line ?? meta.command ?? '')) + td(esc(cpu.join('; '))) + td(inputsOf(meta)) + '</tr>';
        }).join('') + '</tbody></table></div>' +
        '<details id="provenance-raw"><summary>Raw meta.json</summary>' + DATA.meta.map((m) =>
          '<p><code>' + esc(m.dir) + '</code></p><pre class="vec">' + esc(JSON.stringify(m.meta, null, 2)) + '</pre>').join('') + '</details>';
    }
    if (DATA.absent.length) {
      h += '<div class="absent"><strong>Not in these results:</strong><ul>' +
        DATA.absent.map((a) => '<li>' + esc(a) + '.</li>').join('') + '</ul></div>';
    }
    $('provenance').innerHTML = h;
    $('footer').textContent = 'attention-numerics ' + DATA.tool_version +
      '. This page is self-contained: the data and the Vega runtime are inlined; it makes no network request.';
  }

  // ---- 01 illustration ----------------------------------------------------------------------
  const ILL = DATA.illustration;
  const KINDS = ['Exact', 'FP8 without rotation', 'FP8 with rotation'];
  function illCurrent() {
    const i = Number($('ill-common').value);
    return ILL[$('ill-center').checked ? 'center' : 'plain'][i];
  }
  function illBars(p) {
    const rows = [];
    for (let j = 0; j < 4; ++j) {
      rows.push({ key: 'k' + (j + 1), kind: KINDS[0], weight: p.w_exact[j] });
      rows.push({ key: 'k' + (j + 1), kind: KINDS[1], weight: p.w_fp8[j] });
      rows.push({ key: 'k' + (j + 1), kind: KINDS[2], weight: p.w_fp8_rot[j] });
    }
    return rows;
  }
  function illWeightsTable(p) {
    const rows = [];
    for (let j = 0; j < 4; ++j) {
      rows.push({ key: 'k' + (j + 1), common: p.common, center: p.center, w_exact: p.w_exact[j],
        w_fp8: p.w_fp8[j], w_fp8_rot: p.w_fp8_rot[j], tv_fp8: p.tv_fp8, tv_fp8_rot: p.tv_fp8_rot });
    }
    return { columns: ['key', 'common', 'center', 'w_exact', 'w_fp8', 'w_fp8_rot', 'tv_fp8', 'tv_fp8_rot'], rows: rows };
  }
  function illVectorsTable(p) {
    const rows = [{ vector: 'q', original: p.q[0], fp8: p.q[1], rotated_fp8: p.q[2] }];
    p.k.forEach((k, j) => rows.push({ vector: 'k' + (j + 1), original: k[0], fp8: k[1], rotated_fp8: k[2] }));
    for (const r of rows) { r.common = p.common; r.center = p.center; }
    return { columns: ['vector', 'common', 'center', 'original', 'fp8', 'rotated_fp8'], rows: rows };
  }
  function renderIllustration() {
    const p = illCurrent();
    $('ill-common-value').textContent = String(p.common) + (p.center ? ' (mean key subtracted)' : '');
    let h = '<thead><tr><th class="l">Key</th><th>Exact</th><th>FP8 without rotation</th><th>FP8 with rotation</th></tr></thead><tbody>';
    for (let j = 0; j < 4; ++j) {
      h += '<tr data-key="k' + (j + 1) + '"><td class="l">k' + (j + 1) + '</td>' + cell(p.w_exact[j], 4, 'w-exact') +
        cell(p.w_fp8[j], 4, 'w-fp8') + cell(p.w_fp8_rot[j], 4, 'w-fp8-rot') + '</tr>';
    }
    $('ill-weights').innerHTML = h + '</tbody>';
    for (const [id, v] of [['ill-tv-fp8', p.tv_fp8], ['ill-tv-rot', p.tv_fp8_rot]]) {
      $(id).textContent = num(v, 4);
      $(id).dataset.value = String(v);
    }
    const t = illVectorsTable(p);
    const forms = [['original', p.center ? 'original, mean key subtracted' : 'original'], ['fp8', 'FP8, no rotation'], ['rotated_fp8', 'FP8, rotated coordinates']];
    let v = '<thead><tr><th class="l">Vector</th><th class="l">Form</th>' + [1, 2, 3, 4, 5, 6, 7, 8].map((c) => '<th>c' + c + '</th>').join('') + '</tr></thead><tbody>';
    for (const r of t.rows) {
      forms.forEach(([f, label], fi) => {
        v += '<tr' + (fi === 0 ? ' class="first"' : '') + '><td class="l">' + (fi === 0 ? r.vector : '') + '</td><td class="l">' + (r.vector === 'q' && fi === 0 ? 'original' : label) + '</td>' +
          r[f].map((x) => cell(x, 3)).join('') + '</tr>';
      });
    }
    $('ill-vectors').innerHTML = v + '</tbody>';
    const view = window.attnumReport.views.illustration;
    if (view) return replaceData(view, 'w', illBars(p));
    return Promise.resolve();
  }
  async function setupIllustration() {
    const slider = $('ill-common');
    slider.max = String(ILL.commons.length - 1);
    const start = ILL.commons.indexOf(100);
    slider.value = String(start >= 0 ? start : 0);
    $('ill-signs').textContent = '(' + ILL.signs.map((s) => (s > 0 ? '+' : '\u2212')).join(' ') + ')';
    if (ILL.signs.every((s) => s > 0)) {
      $('ill-signs-note').textContent = ' The signs come from the study\'s rotation seed; for eight channels it happens to draw eight +1 signs, so here the rotation is the plain normalised Hadamard matrix. Heads with 64 or 128 channels get mixed signs from the same seed.';
    }
    const spec = {
      width: 300, height: 220, datasets: { w: illBars(illCurrent()) }, data: { name: 'w' },
      mark: 'bar',
      encoding: {
        x: { field: 'key', type: 'nominal', title: 'Key', axis: { labelAngle: 0 } },
        xOffset: { field: 'kind', sort: KINDS },
        y: { field: 'weight', type: 'quantitative', title: 'Attention weight', scale: { domain: [0, 1] } },
        color: { field: 'kind', type: 'nominal', sort: KINDS, title: null,
          scale: { domain: KINDS, range: ['#333333', '#2f6fb0', '#c0392b'] }, legend: { orient: 'bottom', direction: 'vertical' } },
        tooltip: [{ field: 'key' }, { field: 'kind' }, { field: 'weight', format: '.4f' }]
      }
    };
    window.attnumReport.views.illustration = (await vegaEmbed('#ill-chart', spec, EMBED)).view;
    slider.addEventListener('input', renderIllustration);
    $('ill-center').addEventListener('change', renderIllustration);
    addExports('ill-weights-exports', 'illustration-weights', 'Weights', () => illWeightsTable(illCurrent()));
    addExports('ill-vectors-exports', 'illustration-vectors', 'Vectors', () => illVectorsTable(illCurrent()));
    await renderIllustration();
  }

  // ---- 02 heads -----------------------------------------------------------------------------
  const HEADS = DATA.heads;
  let filtered = [];
  let selected = -1;
  const headKey = (r) => String(r.model) + '|' + String(r.layer) + '|' + String(r.head) + '|' + String(r.kernel);
  function fillSelect(id, field) {
    const values = [...new Set(HEADS.rows.map((r) => r[field]))].filter((v) => v !== null && v !== undefined);
    $(id).innerHTML = '<option value="">all</option>' + values.map((v) => '<option>' + esc(v) + '</option>').join('');
  }
  function applyFilters() {
    const m = $('f-model').value, k = $('f-kernel').value, t = $('f-transform').value, h = $('f-harmed').value;
    filtered = HEADS.rows.filter((r) => (!m || String(r.model) === m) && (!k || String(r.kernel) === k) &&
      (!t || String(r.transform) === t) &&
      (!h || (h.startsWith('label:') ? labelOf(r) === h.slice(6) : String(r.harmed) === h)));
    renderInspector();
    renderCounts();
    renderSummary();
    const view = window.attnumReport.views.heads;
    return view ? replaceData(view, 'pts', scatterRows()) : Promise.resolve();
  }
  // A head's class: its noise-floor label (harmed, helped, null); older results without one
  // fall back to the sign (harmed or helped).
  function labelOf(r) {
    if (r.label === 'harmed' || r.label === 'helped' || r.label === 'null') return r.label;
    return r.harmed === true ? 'harmed' : r.harmed === false ? 'helped' : 'null';
  }
  function scatterRows() {
    return filtered.filter((r) => typeof r.predicted_score === 'number' && typeof r.observed_score === 'number')
      .map((r) => ({ model: r.model, layer: r.layer, head: r.head, kernel: r.kernel, transform: r.transform,
        predicted_score: r.predicted_score, observed_score: r.observed_score,
        observed_se: typeof r.observed_se === 'number' ? r.observed_se : null, harm: labelOf(r) }));
  }
  function renderCounts() {
    let harmed = 0, pred = 0, tp = 0, nul = 0;
    for (const r of filtered) {
      const ph = typeof r.predicted_score === 'number' && r.predicted_score > 0;
      harmed += r.harmed === true; pred += ph; tp += ph && r.harmed === true; nul += labelOf(r) === 'null';
    }
    $('heads-counts').textContent = filtered.length + ' of ' + HEADS.rows.length + ' head rows shown; ' + harmed +
      ' harmed (observed score > 0), ' + nul + ' null (within the noise floor), ' + pred +
      ' predicted harmed (predicted score > 0), ' + tp + ' both.';
  }
  function summaryRows() {
    if (!DATA.summary) return [];
    const k = $('f-kernel').value, t = $('f-transform').value;
    return DATA.summary.rows.filter((r) => (!k || String(r.kernel) === k) && (!t || String(r.transform) === t));
  }
  function renderSummary() {
    if (!DATA.summary) { $('summary-wrap').innerHTML = '<p class="note">No summary.json in these results.</p>'; return; }
    let h = '<table id="summary"><thead><tr><th class="l">Kernel</th><th class="l">Transform</th><th class="l">Predictor</th><th>Heads</th><th>Harmed</th><th>Null</th>' +
      '<th>AUC [95%]</th><th>Precision</th><th>Recall</th><th>Spearman</th><th>TP / FP / FN / TN</th><th>AUC non-null</th>' +
      '<th class="l">Interval method</th></tr></thead><tbody>';
    for (const r of summaryRows()) {
      h += '<tr><td class="l">' + esc(r.kernel) + '</td><td class="l">' + esc(r.transform) + '</td><td class="l">' + esc(predictorName(r.predictor_model)) +
        '</td><td>' + num(r.n_heads, 0) + '</td><td>' + num(r.n_harmed, 0) + '</td><td>' + num(r.n_null, 0) + '</td><td>' +
        interval(r.auc, r.auc_lo, r.auc_hi, 3) + '</td><td>' +
        interval(r.precision, r.precision_lo, r.precision_hi, 2) + '</td><td>' + interval(r.recall, r.recall_lo, r.recall_hi, 2) +
        '</td><td>' + interval(r.spearman, r.spearman_lo, r.spearman_hi, 3) + '</td><td>' +
        [r.tp, r.fp, r.fn, r.tn].map((x) => num(x, 0)).join(' / ') + '</td><td>' +
        interval(r.auc_nonnull, r.auc_nonnull_lo, r.auc_nonnull_hi, 3) + '</td><td class="l ci-method">' + esc(methodText(r)) + '</td></tr>';
    }
    $('summary-wrap').innerHTML = h + '</tbody></table>';
  }
  function predictorName(m) {
    if (m === undefined || m === null) return 'kernel-aware';
    return m === 'kernel' ? 'kernel-aware' : 'fixed: ' + m;
  }
  // "jackknife-t, 6 models, 0 dropped": the interval's method and what it rests on.
  function methodText(r) {
    const m = r.ci_method ?? 'cluster-bootstrap-percentile';
    const name = m === 'cluster-jackknife-t' ? 'jackknife-t' : m === 'cluster-bootstrap-percentile' ? 'percentile bootstrap' : m;
    const kind = r.cluster === 'model+layer' ? 'model+layer clusters' : 'models';
    return name + ', ' + (r.n_clusters ?? '?') + ' ' + kind + (r.ci_dropped !== undefined ? ', ' + r.ci_dropped + ' dropped' : '');
  }
  let headFmt = null;
  function renderInspector() {
    if (!headFmt) headFmt = { pred: colFormat(column(HEADS.rows, 'predicted_score'), 3), obs: colFormat(column(HEADS.rows, 'observed_score'), 3),
      se: colFormat(column(HEADS.rows, 'observed_se'), 3) };
    const body = document.querySelector('#inspector tbody');
    const parts = new Array(filtered.length);
    for (let i = 0; i < filtered.length; ++i) {
      const r = filtered[i];
      parts[i] = '<tr id="head-row-' + i + '" data-i="' + i + '" data-key="' + esc(headKey(r)) + '" role="row"' +
        (r.harmed === true ? ' class="harmed"' : '') + '><td>' + (i + 1) + '</td><td class="l">' + esc(r.model) + '</td><td>' +
        esc(r.layer) + '</td><td>' + esc(r.head) + '</td><td class="l">' + esc(r.kernel) + '</td><td class="l">' +
        esc(r.transform) + '</td>' + cell(r.predicted_score, headFmt.pred) + cell(r.observed_score, headFmt.obs, 'obs') + '<td class="l">' +
        (r.harmed === true ? 'yes' : r.harmed === false ? 'no' : '—') + '</td><td class="l label-' + labelOf(r) + '">' +
        labelOf(r) + (typeof r.observed_se === 'number' ? ' (se ' + num(r.observed_se, headFmt.se) + ')' : '') + '</td></tr>';
    }
    body.innerHTML = parts.join('');
    selected = -1;
    select(filtered.length ? 0 : -1, false);
    $('head-detail').innerHTML = '';
  }
  function select(i, scroll) {
    const body = document.querySelector('#inspector tbody');
    const old = body.querySelector('tr.sel');
    if (old) { old.classList.remove('sel'); old.removeAttribute('aria-selected'); }
    selected = i;
    if (i < 0) return;
    const tr = body.children[i];
    tr.classList.add('sel');
    tr.setAttribute('aria-selected', 'true');
    $('inspector-wrap').setAttribute('aria-activedescendant', tr.id);
    if (scroll !== false) tr.scrollIntoView({ block: 'nearest' });
  }
  function detailTable(r) {
    const d = DATA.details && DATA.details[headKey(r)];
    const rows = [];
    if (!d) return { columns: ['text', 'condition', 'rel_err', 'predicted_rel_err'], rows: rows };
    for (const c of d.conditions) {
      d.texts.forEach((t, i) => rows.push({ text: t, condition: c.condition, rel_err: c.rel_err[i], predicted_rel_err: c.predicted_rel_err[i] }));
      rows.push({ text: 'exp(mean log error) - 1', condition: c.condition, rel_err: c.geo, predicted_rel_err: c.pred_geo });
    }
    return { columns: ['text', 'condition', 'rel_err', 'predicted_rel_err'], rows: rows };
  }
  function openHead(i) {
    if (i < 0 || i >= filtered.length) return;
    const r = filtered[i];
    const d = DATA.details && DATA.details[headKey(r)];
    let h = '<h3 id="detail-title">' + esc(r.model) + ', layer ' + esc(r.layer) + ', head ' + esc(r.head) + ', kernel ' +
      esc(r.kernel) + ' (row ' + (i + 1) + ', transform ' + esc(r.transform) + ')</h3><p>Observed score ' + num(r.observed_score) +
      ', predicted score ' + num(r.predicted_score) + (r.n_texts !== undefined ? ', over ' + num(r.n_texts, 0) + ' texts' : '') + '. ';
    if (typeof r.mean_log_err_plain === 'number' && typeof r.mean_log_err_transform === 'number') {
      h += 'exp(mean log error) &minus; 1: plain ' + num(Math.expm1(r.mean_log_err_plain)) + ', ' + esc(r.transform) + ' ' +
        num(Math.expm1(r.mean_log_err_transform)) + '.';
    }
    h += '</p>';
    if (!d) {
      h += '<p class="note">No per-text rows for this head (rows.csv is absent or does not cover it).</p>';
    } else {
      h += '<table id="detail-table"><thead><tr><th class="l" rowspan="2">Text</th>' + d.conditions.map((c) =>
        '<th colspan="2" class="grp">' + esc(c.condition) + '</th>').join('') + '</tr><tr>' +
        d.conditions.map(() => '<th>measured</th><th>predicted</th>').join('') + '</tr></thead><tbody>';
      const fm = d.conditions.map((c) => colFormat([...c.rel_err, c.geo], 3)), fp = d.conditions.map((c) => colFormat([...c.predicted_rel_err, c.pred_geo], 3));
      d.texts.forEach((t, ti) => {
        h += '<tr><td class="l">' + esc(t) + '</td>' + d.conditions.map((c, ci) => cell(c.rel_err[ti], fm[ci]) + cell(c.predicted_rel_err[ti], fp[ci])).join('') + '</tr>';
      });
      h += '<tr class="geo"><td class="l">exp(mean log error) &minus; 1</td>' + d.conditions.map((c, ci) => cell(c.geo, fm[ci]) + cell(c.pred_geo, fp[ci])).join('') +
        '</tr></tbody></table><p class="note">Relative error is ||O &minus; O<sub>ref</sub>||<sub>F</sub> / ||O<sub>ref</sub>||<sub>F</sub> against fp64 ' +
        'attention of the same operands, per text. The last row turns the mean of log(1 + error) over texts back into an error.</p>';
    }
    h += '<div class="exports" id="detail-exports"></div>';
    $('head-detail').innerHTML = h;
    addExports('detail-exports', 'head-detail', 'This head', () => detailTable(r));
  }
  // ---- harm grid ----------------------------------------------------------------------------
  // The kernel and transform shown first (grid and scatter): the first summary row's, else the
  // first head row's.
  function firstSelection() {
    const s = DATA.summary && DATA.summary.rows.find((r) => HEADS.rows.some((h) => h.kernel === r.kernel && h.transform === r.transform));
    const r = s || HEADS.rows[0] || {};
    return { kernel: r.kernel === undefined ? '' : String(r.kernel), transform: r.transform === undefined ? '' : String(r.transform) };
  }
  // A cell's colour: white to red (harmed) or blue (helped), by |observed score| over the largest
  // |observed score| of all heads (square root, so small scores stay visible).
  function gridColour(x, vmax) {
    if (typeof x !== 'number' || !(vmax > 0)) return '#ffffff';
    const t = Math.sqrt(Math.min(1, Math.abs(x) / vmax));
    const to = x > 0 ? [192, 57, 43] : [47, 111, 176];
    return 'rgb(' + to.map((c) => Math.round(255 + (c - 255) * t)).join(',') + ')';
  }
  function renderGrid() {
    const k = $('g-kernel').value, t = $('g-transform').value;
    let vmax = 0;
    for (const r of HEADS.rows) if (typeof r.observed_score === 'number') vmax = Math.max(vmax, Math.abs(r.observed_score));
    const groups = new Map();
    HEADS.rows.forEach((r, i) => {
      if ((k && String(r.kernel) !== k) || (t && String(r.transform) !== t)) return;
      const g = String(r.model) + '|' + String(r.kernel) + '|' + String(r.transform);
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(i);
    });
    // Grids in summary.json's (kernel, transform) order, then by condition and model name.
    const rank = (kernel, transform) => {
      const i = DATA.summary ? DATA.summary.rows.findIndex((r) => String(r.kernel) === kernel && String(r.transform) === transform) : -1;
      return i >= 0 ? i : 1e6 + (COND_ORDER.indexOf(transform) + 1) * 1e3;
    };
    const order = [...groups.keys()].map((g) => g.split('|')).sort((a, b) =>
      rank(a[1], a[2]) - rank(b[1], b[2]) || a[1].localeCompare(b[1]) || a[2].localeCompare(b[2]) || a[0].localeCompare(b[0]));
    const parts = [];
    for (const [model, kernel, transform] of order) {
      const idx = groups.get(model + '|' + kernel + '|' + transform);
      const layers = [...new Set(idx.map((i) => Number(HEADS.rows[i].layer)))].sort((a, b) => a - b);
      const heads = [...new Set(idx.map((i) => Number(HEADS.rows[i].head)))].sort((a, b) => a - b);
      const at = new Map(idx.map((i) => [HEADS.rows[i].layer + '|' + HEADS.rows[i].head, i]));
      let h = '<figure class="hg" data-model="' + esc(model) + '" data-kernel="' + esc(kernel) + '" data-transform="' + esc(transform) +
        '"><figcaption>' + esc(model) + ' · ' + esc(kernel) + ' · ' + esc(transform) + '</figcaption><div class="hg-grid" style="grid-template-columns: auto repeat(' +
        heads.length + ', 11px)"><span class="hg-lab"></span>' + heads.map((hd) => '<span class="hg-lab">' + (hd % 5 === 0 ? hd : '') + '</span>').join('');
      for (const l of layers) {
        h += '<span class="hg-lab">' + l + '</span>';
        for (const hd of heads) {
          const i = at.get(l + '|' + hd);
          if (i === undefined) { h += '<span></span>'; continue; }
          const r = HEADS.rows[i], lab = labelOf(r), pred = typeof r.predicted_score === 'number' && r.predicted_score > 0;
          h += '<span class="hg-cell label-' + lab + (pred ? ' pred' : '') + '" data-row="' + i + '" style="background:' + gridColour(r.observed_score, vmax) +
            '" title="layer ' + l + ', head ' + hd + ': observed ' + esc(num(r.observed_score, 4)) + ', predicted ' + esc(num(r.predicted_score, 4)) + ', ' + lab + '"></span>';
        }
      }
      parts.push(h + '</div></figure>');
    }
    $('grid-list').innerHTML = parts.join('') || '<p class="absent">No heads for this kernel and transform.</p>';
  }
  // Selects a head row in the inspector: the filters are set to its model, kernel and transform.
  async function selectHeadRow(row) {
    $('f-model').value = String(row.model); $('f-kernel').value = String(row.kernel);
    $('f-transform').value = String(row.transform); $('f-harmed').value = '';
    await applyFilters();
    const i = filtered.indexOf(row);
    if (i < 0) return;
    select(i);
    openHead(i);
    $('s-inspector').scrollIntoView({ block: 'start' });
    $('inspector-wrap').focus({ preventScroll: true });
  }
  function setupGrid(first) {
    if (!HEADS) {
      $('grid-present').style.display = 'none';
      $('grid-absent').innerHTML = '<p class="absent">No heads.csv in these result folders.</p>';
      return;
    }
    fillSelect('g-kernel', 'kernel'); fillSelect('g-transform', 'transform');
    $('g-kernel').value = first.kernel; $('g-transform').value = first.transform;
    $('grid-legend').innerHTML = '<span>helped</span><span class="hg-ramp"></span><span>harmed</span>' +
      '<span><span class="hg-cell label-null"></span>null (within the noise floor)</span>' +
      '<span><span class="hg-cell pred" style="background:#fff;border:1px solid #ccc"></span>predicted harmed</span>';
    for (const id of ['g-kernel', 'g-transform']) $(id).addEventListener('change', renderGrid);
    $('grid-list').addEventListener('click', (e) => {
      const c = e.target.closest('.hg-cell');
      if (!c) return;
      const old = $('grid-list').querySelector('.hg-cell.sel');
      if (old) old.classList.remove('sel');
      c.classList.add('sel');
      selectHeadRow(HEADS.rows[Number(c.dataset.row)]).catch((err) => console.error(String(err)));
    });
    renderGrid();
  }

  async function setupHeads() {
    if (!HEADS) {
      $('heads-present').style.display = 'none';
      $('inspector-present').style.display = 'none';
      setupGrid(null);
      $('heads-absent').innerHTML = '<p class="absent">No heads.csv in these result folders: run <code>attnum heads --out DIR</code> and pass DIR to <code>--results</code>.</p>';
      return;
    }
    fillSelect('f-model', 'model'); fillSelect('f-kernel', 'kernel'); fillSelect('f-transform', 'transform');
    const models = [...new Set(HEADS.rows.map((r) => predictorName(r.predictor_model)))];
    $('heads-predictor').textContent = 'Predictor: ' + models.join(', ') +
      ' (kernel-aware: models each kernel\'s own numerics; fixed: one preset scores every kernel, as seed 000 did).';
    for (const id of ['f-model', 'f-kernel', 'f-transform', 'f-harmed']) $(id).addEventListener('change', applyFilters);
    const wrap = $('inspector-wrap');
    wrap.addEventListener('keydown', (e) => {
      const n = filtered.length;
      if (!n) return;
      let i = selected;
      if (e.key === 'ArrowDown') i = Math.min(n - 1, i + 1);
      else if (e.key === 'ArrowUp') i = Math.max(0, i - 1);
      else if (e.key === 'PageDown') i = Math.min(n - 1, i + 15);
      else if (e.key === 'PageUp') i = Math.max(0, i - 15);
      else if (e.key === 'Home') i = 0;
      else if (e.key === 'End') i = n - 1;
      else if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); openHead(selected); return; }
      else return;
      e.preventDefault();
      select(i);
    });
    document.querySelector('#inspector tbody').addEventListener('click', (e) => {
      const tr = e.target.closest('tr');
      if (!tr) return;
      select(Number(tr.dataset.i), false);
      openHead(selected);
      wrap.focus();
    });
    addExports('heads-exports', 'heads', 'Heads shown', () => ({ columns: HEADS.columns, rows: filtered }));
    // One kernel and one transform at first; "all" and the others are in the selects.
    const first = firstSelection();
    $('f-kernel').value = first.kernel; $('f-transform').value = first.transform;
    setupGrid(first);
    if (DATA.summary) addExports('summary-exports', 'summary', 'Summary', () => ({ columns: DATA.summary.columns, rows: DATA.summary.rows }));
    filtered = HEADS.rows.filter((r) => (!first.kernel || String(r.kernel) === first.kernel) && (!first.transform || String(r.transform) === first.transform));
    const spec = {
      width: 460, height: 360, datasets: { pts: scatterRows() },
      layer: [
        { data: { name: 'pts' }, mark: { type: 'point', filled: true, opacity: 0.65, size: 28 },
          encoding: {
            x: { field: 'predicted_score', type: 'quantitative', title: 'Predicted score (transform minus plain)', scale: { zero: false } },
            y: { field: 'observed_score', type: 'quantitative', title: 'Observed score (transform minus plain)', scale: { zero: false } },
            color: { field: 'harm', type: 'nominal', title: null, scale: { domain: ['harmed', 'helped', 'null'], range: ['#c0392b', '#2f6fb0', '#9a9a9a'] },
              legend: { orient: 'bottom', labelExpr: "datum.label == 'harmed' ? 'Harmed (above the noise floor)' : datum.label == 'helped' ? 'Helped (above the noise floor)' : 'Null (within the noise floor)'" } },
            tooltip: [{ field: 'model' }, { field: 'layer' }, { field: 'head' }, { field: 'kernel' }, { field: 'transform' },
              { field: 'predicted_score', format: '.4f' }, { field: 'observed_score', format: '.4f' },
              { field: 'observed_se', format: '.4f' }, { field: 'harm', title: 'label' }]
          } },
        { data: { values: [{ z: 0 }] }, mark: { type: 'rule', color: '#777', strokeDash: [4, 3] }, encoding: { x: { field: 'z', type: 'quantitative' } } },
        { data: { values: [{ z: 0 }] }, mark: { type: 'rule', color: '#777', strokeDash: [4, 3] }, encoding: { y: { field: 'z', type: 'quantitative' } } }
      ]
    };
    window.attnumReport.views.heads = (await vegaEmbed('#heads-chart', spec, EMBED)).view;
    await applyFilters();
  }

  // ---- 03 P cast ----------------------------------------------------------------------------
  async function setupPcast() {
    const th = DATA.pcast_theory, sim = DATA.pcast_simulate, dp = DATA.pcast_dp, ov = DATA.pcast_overflow;
    if (!th && !sim && !dp && !ov) {
      $('pcast-present').style.display = 'none';
      $('pcast-absent').innerHTML = '<p class="absent">No pcast_*.csv in these result folders: run <code>attnum pcast ... --out DIR</code> and pass DIR to <code>--results</code>.</p>';
      return;
    }
    const S = (r) => 'S = ' + r.scale;
    const layers = [];
    if (th) layers.push({ data: { values: th.rows.map((r) => ({ delta: r.delta, y: r.underflow_fraction, S: S(r), src: 'theory' })) },
      mark: { type: 'line' }, encoding: { x: { field: 'delta', type: 'quantitative', title: 'Δ (sink strength)' },
        y: { field: 'y', type: 'quantitative', title: 'Underflow fraction' }, color: { field: 'S', type: 'nominal', title: 'Scale' } } });
    if (sim) layers.push({ data: { values: sim.rows.filter((r) => typeof r.underflow_measured === 'number').map((r) => ({ delta: r.delta, y: r.underflow_measured, S: S(r), order: String(r.order), kernel: String(r.kernel ?? '') })) },
      mark: { type: 'point', filled: true, size: 40 }, encoding: { x: { field: 'delta', type: 'quantitative', title: 'Δ (sink strength)' },
        y: { field: 'y', type: 'quantitative', title: 'Underflow fraction' }, color: { field: 'S', type: 'nominal', title: 'Scale' },
        shape: { field: 'order', type: 'nominal', title: 'KV order (simulation)' },
        tooltip: [{ field: 'delta' }, { field: 'S' }, { field: 'order' }, { field: 'kernel' }, { field: 'y', title: 'underflow', format: '.4f' }] } });
    if (layers.length) await vegaEmbed('#pcast-underflow', { width: 520, height: 260, layer: layers }, EMBED);
    else $('pcast-underflow').innerHTML = '<p class="absent">No theory or simulation rows.</p>';
    const mse = sim ? sim.rows.filter((r) => typeof r.mse === 'number' && r.mse > 0) : [];
    if (mse.length) {
      // Vega-Lite draws no symbols in a dash-only legend, so the caption names the dashes.
      const DASHES = [[1, 0], [6, 3], [2, 2], [1, 3]], DASH_NAMES = ['solid', 'dashed', 'dotted', 'sparsely dotted'];
      const orders = [...new Set(mse.map((r) => String(r.order)))].sort().slice(0, 4);
      $('pcast-mse-dash').textContent = ' Line style: ' + orders.map((o, i) => DASH_NAMES[i] + ' = ' + o).join(', ') + '.';
      await vegaEmbed('#pcast-mse', { width: 520, height: 260, data: { values: mse.map((r) => ({ delta: r.delta, mse: r.mse, S: S(r), order: String(r.order), series: S(r) + ', ' + r.order })) },
        mark: { type: 'line', point: true }, encoding: { x: { field: 'delta', type: 'quantitative', title: 'Δ (sink strength)' },
          y: { field: 'mse', type: 'quantitative', title: 'Output MSE', scale: { type: 'log' }, axis: { format: '.0e' } }, color: { field: 'S', type: 'nominal', title: 'Scale' },
          strokeDash: { field: 'order', type: 'nominal', title: 'KV order', scale: { domain: orders, range: DASHES.slice(0, orders.length) }, legend: null }, detail: { field: 'series' } } }, EMBED);
    } else $('pcast-mse').innerHTML = '<p class="absent">No simulation rows with a positive MSE.</p>';
    if (dp) {
      await vegaEmbed('#pcast-dp', { width: 520, height: 220, data: { values: dp.rows },
        mark: { type: 'line', point: { size: 12 } }, encoding: { x: { field: 'scale', type: 'quantitative', title: 'Static scale S', scale: { type: 'log', base: 2 } },
          y: { field: 'dp', type: 'quantitative', title: 'dp(S)', scale: { zero: true } } } }, EMBED);
    } else $('pcast-dp').innerHTML = '<p class="absent">No pcast_dp.csv.</p>';
    for (const [t, name, label] of [[th, 'pcast_theory', 'Theory'], [sim, 'pcast_simulate', 'Simulation'], [dp, 'pcast_dp', 'dp(S)'], [ov, 'pcast_overflow', 'Overflow']]) {
      if (t) addExports('pcast-exports', name, label, () => ({ columns: t.columns, rows: t.rows }));
    }
  }

  // ---- 04 loss ------------------------------------------------------------------------------
  // Ratio per condition and kernel (left) and paired CE differences (right), each with its interval.
  async function lossPlots(L, P) {
    const models = new Set(L.rows.map((r) => String(r.model ?? '')));
    const label = (r, c) => (models.size > 1 ? String(r.model ?? '') + ' · ' : '') + String(c);
    const pts = L.rows.filter((r) => typeof r.ppl_ratio === 'number').map((r) => ({ cond: label(r, r.condition), kernel: String(r.kernel),
      v: r.ppl_ratio, lo: typeof r.ppl_ratio_lo === 'number' ? r.ppl_ratio_lo : r.ppl_ratio, hi: typeof r.ppl_ratio_hi === 'number' ? r.ppl_ratio_hi : r.ppl_ratio }));
    const order = [...new Set(pts.map((r) => r.cond))];
    const plot = (rows, sort, ref, title, fmt) => ({
      width: 240, height: Math.max(80, 26 * sort.length), datasets: { d: rows },
      layer: [
        { data: { values: [{ z: ref }] }, mark: { type: 'rule', color: '#777', strokeDash: [4, 3] }, encoding: { x: { field: 'z', type: 'quantitative' } } },
        { data: { name: 'd' }, mark: { type: 'rule', strokeWidth: 2 }, encoding: {
          y: { field: 'cond', type: 'nominal', sort: sort, title: null }, yOffset: { field: 'kernel' },
          x: { field: 'lo', type: 'quantitative', title: title, scale: { zero: false } }, x2: { field: 'hi' }, color: { field: 'kernel', type: 'nominal', title: 'Kernel' } } },
        { data: { name: 'd' }, mark: { type: 'point', filled: true, size: 50 }, encoding: {
          y: { field: 'cond', type: 'nominal', sort: sort, title: null }, yOffset: { field: 'kernel' },
          x: { field: 'v', type: 'quantitative' }, color: { field: 'kernel', type: 'nominal', title: 'Kernel' },
          tooltip: [{ field: 'cond', title: 'condition' }, { field: 'kernel' }, { field: 'v', title: 'value', format: fmt },
            { field: 'lo', format: fmt }, { field: 'hi', format: fmt }] } }
      ]
    });
    if (pts.length) window.attnumReport.views.loss = (await vegaEmbed('#loss-plot', plot(pts, order, 1, 'Perplexity ratio to the reference', '.3f'), EMBED)).view;
    const pairs = P ? P.rows.filter((r) => typeof r.delta_ce === 'number').map((r) => ({ cond: label(r, String(r.condition_a) + ' − ' + String(r.condition_b)),
      kernel: String(r.kernel), v: r.delta_ce, lo: typeof r.delta_ce_lo === 'number' ? r.delta_ce_lo : r.delta_ce,
      hi: typeof r.delta_ce_hi === 'number' ? r.delta_ce_hi : r.delta_ce })) : [];
    if (pairs.length) window.attnumReport.views.lossPaired = (await vegaEmbed('#loss-paired-plot',
      plot(pairs, [...new Set(pairs.map((r) => r.cond))], 0, 'Paired CE difference a − b (nats)', '.4f'), EMBED)).view;
  }
  async function setupLoss() {
    const L = DATA.loss;
    if (!L) {
      $('loss-present').style.display = 'none';
      const zoo = (DATA.meta || []).some((m) => m.meta && m.meta.source === 'zoo');
      $('loss-absent').innerHTML = '<p class="absent">No loss.json in these result folders' +
        (zoo ? ': the heads come from the synthetic zoo, which has no language model to score, so no loss was run. <code>attnum study --model MODEL</code> runs one' : ': run <code>attnum loss ... --out DIR</code> and pass DIR to <code>--results</code>') + '.</p>';
      return;
    }
    let h = '<table id="loss-table"><thead><tr><th class="l">Model</th><th class="l">Kernel</th><th class="l">Condition</th><th class="l">Reference</th>' +
      '<th>Labels</th><th>exp(CE<sub>v</sub> &minus; CE<sub>ref</sub>) [95%]</th><th>CE ref</th><th>CE variant</th><th>KL</th><th>Top-1</th>' +
      '<th>&Delta;p p50</th><th>&Delta;p p90</th><th>&Delta;p p99</th></tr></thead><tbody>';
    const lf = {};
    for (const k of ['kl_mean', 'dp_p50', 'dp_p90', 'dp_p99']) lf[k] = colFormat(column(L.rows, k), 3);
    for (const r of L.rows) {
      h += '<tr><td class="l">' + esc(r.model ?? '—') + '</td><td class="l">' + esc(r.kernel) + '</td><td class="l">' + esc(r.condition) +
        '</td><td class="l">' + esc(r.reference ?? '—') + '</td>' + cell(r.n_labels, 0) + '<td>' + lossInterval(r, 'ppl_ratio', 3, '×') +
        '</td>' + cell(r.ce_ref, 4) + cell(r.ce_variant, 4) + cell(r.kl_mean, lf.kl_mean) + cell(r.top1_agreement, 3) + cell(r.dp_p50, lf.dp_p50) +
        cell(r.dp_p90, lf.dp_p90) + cell(r.dp_p99, lf.dp_p99) + '</tr>';
    }
    $('loss-wrap').innerHTML = h + '</tbody></table>' + (L.rows.length && L.rows[0].ci_method
      ? '<p class="note" id="loss-ci-method">Ratio intervals: ' + esc(L.rows[0].ci_method) + (typeof L.rows[0].n_text_windows === 'number' ? '; the text windows are the clusters, so the intervals include the variation between texts; [n/a]: no interval (hover for why).' : ', ' + esc(L.rows[0].n_blocks) + ' blocks.') + '</p>' : '');
    addExports('loss-exports', 'loss', 'Loss', () => ({ columns: L.columns, rows: L.rows }));
    const P = DATA.loss_paired;
    await lossPlots(L, P && P.rows.length ? P : null);
    if (!P || !P.rows.length) {
      $('loss-paired-wrap').innerHTML = '<p class="absent">No loss_paired.json in these results (written by <code>attnum loss --out DIR</code>).</p>';
      return;
    }
    let p = '<table id="loss-paired"><thead><tr><th class="l">Kernel</th><th class="l">a &minus; b</th><th>Labels</th>' +
      '<th>&Delta;CE [95%]</th><th>&Delta;KL [95%]</th><th>&Delta;top-1 [95%]</th><th>Block</th><th>Lag-1 autocorr.</th></tr></thead><tbody>';
    const klf = colFormat(column(P.rows, 'delta_kl', 'delta_kl_lo', 'delta_kl_hi'), 3);
    for (const r of P.rows) {
      p += '<tr><td class="l">' + esc(r.kernel) + '</td><td class="l">' + esc(r.condition_a) + ' &minus; ' + esc(r.condition_b) + '</td>' +
        cell(r.n_labels, 0) + '<td>' + lossInterval(r, 'delta_ce', 4) + '</td><td>' +
        lossInterval(r, 'delta_kl', klf) + '</td><td>' + lossInterval(r, 'delta_top1', 4) +
        '</td>' + cell(r.block_length, 0) + cell(r.ce_diff_lag1_autocorrelation, 3) + '</tr>';
    }
    $('loss-paired-wrap').innerHTML = p + '</tbody></table><p class="note">Differences of per-label results of two conditions on the same ' +
      'labels; an interval that contains 0 means the two conditions are not distinguishable on these labels. Intervals: 95% ' +
      esc(P.rows[0].ci_method ?? '') + '. Block: the moving-block length the autocorrelation of the per-token CE differences needs (recorded, not used by the intervals).</p>';
    addExports('loss-exports', 'loss_paired', 'Paired', () => ({ columns: P.columns, rows: P.rows }));
  }

  function renderAnswer() {
    const A = DATA.answer || [];
    if (!A.length) {
      document.getElementById('answer-absent').innerHTML = '<p class="absent">No summary.json: no answer to give (run attnum heads or attnum study).</p>';
      return;
    }
    const attrs = (o, keys) => keys.filter((k) => o[k] !== undefined && o[k] !== null)
      .map((k) => ' data-' + k.replace(/_/g, '-') + '="' + esc(String(o[k])) + '"').join('');
    document.getElementById('answer-list').innerHTML = A.map((a) =>
      '<li class="answer"' + attrs(a, ['kernel', 'transform', 'n_heads', 'n_label_harmed', 'n_harmed_sign', 'auc', 'auc_lo', 'auc_hi']) + '>' +
      esc(a.text) + (a.loss && a.loss.length ? '<ul>' + a.loss.map((l) => '<li class="answer-loss"' +
        attrs(l, ['model', 'ppl_ratio', 'ppl_ratio_lo', 'ppl_ratio_hi', 'delta_ce', 'delta_ce_lo', 'delta_ce_hi']) + '>' +
        esc(l.text) + '</li>').join('') + '</ul>' : '') + '</li>').join('');
  }
  async function main() {
    renderProvenance();
    renderAnswer();
    await setupIllustration();
    await setupHeads();
    await setupPcast();
    await setupLoss();
    window.attnumReport.ready = true;
    document.body.dataset.ready = 'true';
  }
  main().catch((e) => { console.error('report failed: ' + (e && e.stack ? e.stack : e)); });
})();
