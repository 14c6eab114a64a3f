// The page of `cordon audit report` (audit/report.cc embeds it; its SHA-256 is in the CSP).
// Every value from the log is hostile: it reaches the DOM only as textContent (or an option's
// text); no innerHTML, no href or src, no event attribute, and SVG attributes are numbers or
// constants of this file.
'use strict';
(function () {
  const data = JSON.parse(document.getElementById('cordon-audit-data').textContent);
  const SVG_NS = 'http://www.w3.org/2000/svg';

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent, child) {
    parent.appendChild(child);
    return child;
  }
  // An SVG element whose attributes are finite numbers (positions, sizes) and a constant class.
  function svg(tag, cls, nums) {
    const e = document.createElementNS(SVG_NS, tag);
    if (cls) e.setAttribute('class', cls);
    for (const k of Object.keys(nums || {})) {
      const v = nums[k];
      if (typeof v !== 'number' || !Number.isFinite(v)) throw new Error('svg: ' + k + ' is not a number');
      e.setAttribute(k, String(Math.round(v * 10) / 10));
    }
    return e;
  }
  function str(v) {
    return typeof v === 'string' ? v : (v === undefined ? '' : JSON.stringify(v));
  }
  // v when it is an object, else {}: an edited record may hold anything where an object belongs.
  function obj(v) {
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : {};
  }
  function cut(s, max) {
    s = String(s);
    return s.length <= max ? s : s.slice(0, max) + '...';
  }
  // A measurement to one decimal (elapsed and CPU milliseconds).
  function num(v) {
    return typeof v === 'number' ? String(Math.round(v * 10) / 10) : str(v);
  }
  function short(h) {
    return typeof h === 'string' ? h.slice(0, 12) : (h === null ? 'null' : '');
  }
  function table(parent, headers, rows, emptyText) {
    if (rows.length === 0) {
      add(parent, el('p', 'empty', emptyText));
      return null;
    }
    const t = add(parent, el('table'));
    const hr = add(add(t, el('thead')), el('tr'));
    for (const h of headers) add(hr, el('th', null, h));
    const body = add(t, el('tbody'));
    for (const r of rows) {
      const tr = add(body, el('tr'));
      for (const c of r) add(tr, el('td', null, c));
    }
    return t;
  }

  // Every record of every log, in file order, with the log it came from.
  const records = [];
  data.logs.forEach(function (log, i) {
    for (const r of log.records) records.push({ log: i, rec: r });
  });
  const ofType = function (t) {
    return records.filter(function (x) { return x.rec.type === t; });
  };
  const where = function (x) {
    return (data.logs.length > 1 ? data.logs[x.log].path + ':' : '') + x.rec._line;
  };
  const kinds = function (r) {
    return Array.isArray(r._kinds) ? r._kinds : [];
  };

  const body = document.body;
  add(body, el('h1', null, 'cordon audit report'));

  // --- Verification, first.
  const allOk = data.logs.length > 0 && data.logs.every(function (l) { return l.status === 'ok'; });
  const top = add(body, el('div', 'banner ' + (allOk ? 'ok' : 'bad')));
  top.id = 'verdict';
  top.dataset.status = allOk ? 'ok' : 'bad';
  add(top, el('h2', null, allOk
    ? 'Verified: every log is intact and proven complete by signed checkpoints'
    : 'NOT VERIFIED: a log is broken, cut, unproven or not signed (exit code ' + data.exit_code + ')'));
  for (const log of data.logs) {
    const v = log.verification || {};
    const b = add(body, el('div', 'banner ' + (log.status === 'ok' ? 'ok' : 'bad')));
    b.dataset.status = log.status;
    const title = log.status === 'ok' ? 'intact and complete'
      : log.status === 'not_proven' ? 'intact chain, but NOT PROVEN COMPLETE (no verified signed checkpoint)'
        : 'FAILED: ' + str(v.verdict) + ' (exit code ' + str(v.exit_code) + ')';
    add(b, el('h2', null, log.path + ': ' + title));
    if (log.header) add(b, el('p', 'mono', log.header));
    if (v.problem) add(b, el('p', null, 'problem: ' + str(v.problem)));
    add(b, el('p', null, str(v.records) + ' records, ' + str(v.sessions) + ' sessions, mode ' + str(v.mode) +
      ', ' + str(v.checkpoints) + ' checkpoints' + (v.signed ? ' (signed)' : '') +
      ', ' + str(v.witness_checkpoints) + ' witnessed'));
    for (const l of (log.links || [])) {
      add(b, el('p', null, !l.checked
        ? 'continues log ' + str(l.previous_log_id) + ', which is not among the files given: the link is not checked'
        : l.ok ? 'continues ' + str(l.previous_file) + ': the link holds'
          : 'CUT: continues ' + str(l.previous_file) + ', but ' + str(l.problem)));
    }
    for (const s of (v.unfinished_sessions || [])) add(b, el('p', null, 'unfinished: session ' + str(s)));
    for (const w of (v.warnings || [])) add(b, el('p', null, 'warning: ' + str(w)));
    for (const u of (log.unreadable || [])) {
      add(b, el('p', null, 'line ' + u._line + ': not a record (' + u.bytes + ' bytes, ' + u._verified + ')'));
    }
  }

  // --- Counts.
  const changed = [];
  for (const x of records) {
    const r = x.rec;
    if (r.type === 'file_write' && r.status === 'written') {
      changed.push([str(r.path), str(r.op), str(r.tool), short(r.sha256_before), short(r.sha256_after), where(x)]);
    } else if (r.type === 'process' && Array.isArray(obj(r.changes).entries)) {
      for (const e of r.changes.entries.map(obj)) {
        const p = str(e.path) + (e.from !== undefined ? ' (from ' + str(e.from) + ')' : '');
        changed.push([p, str(e.kind), str(r.tool), short(e.sha256_before), short(e.sha256_after), where(x)]);
      }
    } else if (r.type === 'protected_path_removed') {
      changed.push([str(r.path), 'quarantined', str(r.when), '', '', where(x)]);
    } else if (r.type === 'setuid_stripped') {
      changed.push([str(r.path), 'set-id bits stripped ' + str(r.mode_before) + ' -> ' + str(r.mode_after), str(r.when), '', '', where(x)]);
    }
  }
  const files = new Set(changed.map(function (c) { return c[0]; }));
  const denials = records.filter(function (x) { return kinds(x.rec).indexOf('denied') >= 0; });
  const errors = records.filter(function (x) { return kinds(x.rec).indexOf('errors') >= 0; });
  const counts = add(body, el('div', 'counts'));
  const count = function (key, n, label) {
    const c = add(counts, el('div', 'count'));
    const v = add(c, el('span', 'n', n));
    v.dataset.count = key;
    add(c, el('span', null, label));
  };
  const sessionIds = [];
  for (const x of records) {
    const s = typeof x.rec.session === 'string' ? x.rec.session : '';
    if (sessionIds.indexOf(s) < 0) sessionIds.push(s);
  }
  count('sessions', ofType('session_started').length, 'sessions');
  count('calls', ofType('tool_started').length, 'tool calls');
  count('commands', ofType('process').length, 'commands');
  count('files', files.size, 'files changed');
  count('denials', denials.length, 'denials');
  count('network', ofType('network').length, 'connections');
  count('errors', errors.length, 'errors');

  // --- The chart: calls, CPU and memory over time.
  add(body, el('h2', null, 'Activity over time'));
  const times = records.map(function (x) { return Date.parse(x.rec.ts); }).filter(Number.isFinite);
  if (times.length === 0) {
    add(body, el('p', 'empty', 'no timestamps'));
  } else {
    // A loop, not Math.min.apply: a long log would overflow the argument list.
    let t0 = times[0], t1 = times[0];
    for (const t of times) {
      if (t < t0) t0 = t;
      if (t > t1) t1 = t;
    }
    const span = Math.max(t1 - t0, 1), buckets = 60;
    const at = function (ts) {
      const t = Date.parse(ts);
      return Number.isFinite(t) ? Math.min(buckets - 1, Math.floor((t - t0) / span * buckets)) : -1;
    };
    const series = [
      { cls: 'calls', label: 'tool calls started', unit: '', v: new Array(buckets).fill(0) },
      { cls: 'cpu', label: 'CPU ms of commands (at their end)', unit: ' ms', v: new Array(buckets).fill(0) },
      { cls: 'mem', label: 'peak memory of commands (at their end)', unit: ' MiB', v: new Array(buckets).fill(0) },
    ];
    for (const x of records) {
      const b = at(x.rec.ts);
      if (b < 0) continue;
      if (x.rec.type === 'tool_started') series[0].v[b] += 1;
      if (x.rec.type === 'process') {
        if (typeof x.rec.cpu_ms === 'number') series[1].v[b] += x.rec.cpu_ms;
        if (typeof x.rec.max_rss_kb === 'number') series[2].v[b] = Math.max(series[2].v[b], x.rec.max_rss_kb / 1024);
      }
    }
    const W = 960, PH = 70, LEFT = 10, TOP = 20, GAP = 26;
    const H = TOP + series.length * (PH + GAP) + 10;
    const chart = add(body, svg('svg', 'chart', { width: W, height: H }));
    chart.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    chart.id = 'chart';
    series.forEach(function (s, i) {
      const y0 = TOP + i * (PH + GAP);
      const max = s.v.reduce(function (a, b) { return Math.max(a, b); }, 0);
      const label = add(chart, svg('text', null, { x: LEFT, y: y0 - 4 }));
      label.textContent = s.label + ' (max ' + (Math.round(max * 10) / 10) + s.unit + ' per interval)';
      add(chart, svg('line', 'axis', { x1: LEFT, y1: y0 + PH, x2: W - LEFT, y2: y0 + PH }));
      const bw = (W - 2 * LEFT) / buckets;
      s.v.forEach(function (v, b) {
        if (v <= 0 || max <= 0) return;
        const h = Math.max(1, v / max * PH);
        add(chart, svg('rect', s.cls, { x: LEFT + b * bw + 1, y: y0 + PH - h, width: Math.max(bw - 2, 1), height: h }));
      });
    });
    const first = records.find(function (x) { return Date.parse(x.rec.ts) === t0; });
    const last = records.find(function (x) { return Date.parse(x.rec.ts) === t1; });
    add(body, el('p', 'note', 'from ' + str(first.rec.ts) + ' to ' + str(last.rec.ts) + ', in ' + buckets + ' intervals of ' +
      (Math.round(span / buckets) / 1000) + ' s'));
  }

  // --- Files changed, commands, denials, network.
  add(body, el('h2', null, 'Files changed'));
  table(body, ['path', 'change', 'by', 'sha256 before', 'sha256 after', 'line'], changed, 'no file changed');

  add(body, el('h2', null, 'Commands'));
  table(body, ['argv', 'exit code', 'status', 'elapsed ms', 'CPU ms', 'max RSS KiB', 'tool', 'line'],
    ofType('process').map(function (x) {
      const r = x.rec;
      const argv = Array.isArray(r.argv) ? r.argv.map(str).join(' ') : str(r.argv);
      return [cut(argv, 400), r.exit_code === null ? 'null' : str(r.exit_code),
        str(r.status) + (r.error ? ' ' + str(obj(r.error).code) : '') + (r.limit ? ' (limit ' + str(obj(r.limit).name) + ')' : ''),
        num(r.elapsed_ms), num(r.cpu_ms), str(r.max_rss_kb), str(r.tool), where(x)];
    }), 'no command ran');

  add(body, el('h2', null, 'Denials'));
  table(body, ['type', 'tool', 'what', 'rule', 'decided by / reason', 'line'], denials.map(function (x) {
    const r = x.rec;
    if (r.type === 'policy_denied') return [r.type, str(r.tool), 'scope ' + str(r.scope), str(r.rule), str(r.decided_by), where(x)];
    if (r.type === 'network') return [r.type, str(r.identity), str(r.host) + ':' + str(r.port), str(r.rule), str(r.reason), where(x)];
    if (r.type === 'approval') return [r.type, str(r.tool), cut(str(r.subject), 400), str(r.rule), str(r.rule_source) + ': ' + str(r.answer) + ' (' + str(r.asked_via) + ')', where(x)];
    const what = (Array.isArray(r.denials) ? r.denials : []).map(obj).map(function (d) {
      return str(d.path !== undefined ? d.path : d.address !== undefined ? d.address : d.object);
    }).join(', ');
    return [str(r.type), str(r.tool), what, str(r.layer), '', where(x)];
  }), 'nothing was denied');

  add(body, el('h2', null, 'Approvals'));
  table(body, ['tool', 'kind', 'what', 'rule', 'rule source', 'asked via', 'answer', 'waited ms', 'line'],
    ofType('approval').map(function (x) {
      const r = x.rec;
      return [str(r.tool), str(r.kind), cut(str(r.subject), 400), str(r.rule), str(r.rule_source),
        str(r.asked_via), str(r.answer), str(r.wait_ms), where(x)];
    }), 'no approval was asked for');

  add(body, el('h2', null, 'Network'));
  table(body, ['who', 'to', 'decision', 'rule', 'reason / error', 'bytes up', 'bytes down', 'line'],
    ofType('network').map(function (x) {
      const r = x.rec;
      return [str(r.identity), str(r.host) + ':' + str(r.port), str(r.decision), str(r.rule),
        str(r.reason) + (r.error ? ' ' + str(r.error) : ''), str(r.bytes_up), str(r.bytes_down), where(x)];
    }), 'no network connection');

  // --- The timeline, per session, with the filters of `audit show`.
  add(body, el('h2', null, 'Timeline'));
  const bar = add(body, el('div', 'filters'));
  function select(label, values) {
    const l = add(bar, el('label', null, label + ' '));
    const s = add(l, el('select'));
    add(s, el('option', null, '(any)')).value = '';
    for (const v of values) add(s, el('option', null, v)).value = v;
    return s;
  }
  function uniq(f) {
    const out = new Set();
    for (const x of records) {
      const v = f(x.rec);
      if (typeof v === 'string' && v !== '') out.add(v);
    }
    return Array.from(out).sort();
  }
  const fType = select('type', uniq(function (r) { return r.type; }));
  fType.id = 'filter-type';
  const fTool = select('tool', uniq(function (r) { return r.tool; }));
  fTool.id = 'filter-tool';
  function check(label, id) {
    const l = add(bar, el('label'));
    const c = add(l, el('input'));
    c.type = 'checkbox';
    c.id = id;
    add(l, document.createTextNode(' ' + label));
    return c;
  }
  const fErrors = check('errors', 'filter-errors');
  const fDenied = check('denied', 'filter-denied');
  const fChanges = check('changes', 'filter-changes');
  const pl = add(bar, el('label', null, 'path contains '));
  const fPath = add(pl, el('input'));
  fPath.type = 'search';
  fPath.id = 'filter-path';
  const shown = add(bar, el('span', 'note'));
  shown.id = 'filter-shown';

  function describe(r) {
    const parts = [];
    const kv = function (k, v) { if (v !== undefined) parts.push(k + '=' + str(v)); };
    switch (r.type) {
      case 'process': {
        const argv = Array.isArray(r.argv) ? r.argv.map(str).join(' ') : str(r.argv);
        parts.push('argv=' + cut(argv, 200));
        kv('status', r.status);
        kv('exit_code', r.exit_code);
        const counts = obj(obj(r.changes).counts);
        {
          const c = {};
          for (const k of Object.keys(counts)) if (counts[k] !== 0) c[k] = counts[k];
          if (Object.keys(c).length) kv('changes', c);
        }
        kv('error', r.error);
        kv('elapsed_ms', num(r.elapsed_ms));
        break;
      }
      case 'file_write':
        for (const k of ['op', 'path', 'status', 'code', 'sha256_before', 'sha256_after', 'bytes_after']) kv(k, r[k]);
        break;
      case 'policy_denied':
        for (const k of ['scope', 'rule', 'decided_by']) kv(k, r[k]);
        break;
      case 'network':
        kv('identity', r.identity);
        parts.push('to=' + str(r.host) + ':' + str(r.port));
        for (const k of ['decision', 'rule', 'reason', 'error', 'bytes_down']) kv(k, r[k]);
        break;
      default:
        for (const k of Object.keys(r)) {
          if (k[0] === '_' || ['v', 'seq', 'ts', 'session', 'type', 'prev', 'tool'].indexOf(k) >= 0) continue;
          kv(k, cut(str(r[k]), 200));
        }
    }
    return cut(parts.join('  '), 600);
  }
  const MARK = { intact: '', unproven: '?', after_break: '!', torn: '~' };
  const rows = [];
  for (const sid of sessionIds) {
    const mine = records.filter(function (x) { return (typeof x.rec.session === 'string' ? x.rec.session : '') === sid; });
    const start = mine.find(function (x) { return x.rec.type === 'session_started'; });
    const fin = mine.find(function (x) { return x.rec.type === 'session_finished'; });
    const sec = add(body, el('section', 'session'));
    add(sec, el('h3', null, 'session ' + (sid || '(none)') +
      (start ? '  client ' + str(start.rec.client) + '  workspace ' + str(start.rec.workspace) : '') +
      '  ' + str(mine[0].rec.ts) + ' .. ' + str(mine[mine.length - 1].rec.ts) + (fin ? '' : '  (unfinished)')));
    const t = add(sec, el('table', 'timeline'));
    const hr = add(add(t, el('thead')), el('tr'));
    for (const h of ['', 'line', 'time', 'seq', 'type', 'tool', 'details']) add(hr, el('th', null, h));
    const tb = add(t, el('tbody'));
    for (const x of mine) {
      const r = x.rec;
      const tr = add(tb, el('tr', String(r._verified).replace(/[^a-z_]/g, '')));
      if (kinds(r).indexOf('errors') >= 0) tr.classList.add('failed');
      if (kinds(r).indexOf('denied') >= 0) tr.classList.add('refused');
      add(tr, el('td', null, MARK[r._verified] !== undefined ? MARK[r._verified] : '!'));
      add(tr, el('td', null, where(x)));
      add(tr, el('td', null, str(r.ts)));
      add(tr, el('td', null, str(r.seq)));
      add(tr, el('td', 'type', str(r.type)));
      add(tr, el('td', null, str(r.tool !== undefined ? r.tool : r.identity)));
      add(tr, el('td', null, describe(r)));
      rows.push({ tr: tr, rec: r });
    }
  }
  function applyFilters() {
    const type = fType.value, tool = fTool.value, path = fPath.value;
    const any = fErrors.checked || fDenied.checked || fChanges.checked;
    let n = 0;
    for (const row of rows) {
      const r = row.rec, k = kinds(r);
      let ok = (!type || r.type === type) && (!tool || r.tool === tool || r.identity === 'tool ' + tool);
      if (ok && path) ok = (Array.isArray(r._paths) ? r._paths : []).some(function (p) { return String(p).indexOf(path) >= 0; });
      if (ok && any) {
        ok = (fErrors.checked && k.indexOf('errors') >= 0) || (fDenied.checked && k.indexOf('denied') >= 0) ||
          (fChanges.checked && k.indexOf('changes') >= 0);
      }
      row.tr.hidden = !ok;
      if (ok) n++;
    }
    shown.textContent = n + ' of ' + rows.length + ' records shown';
    shown.dataset.shown = String(n);
  }
  for (const c of [fType, fTool, fErrors, fDenied, fChanges]) c.addEventListener('change', applyFilters);
  fPath.addEventListener('input', applyFilters);
  applyFilters();

  add(body, el('p', 'note', 'Generated by cordon audit report from ' + data.logs.map(function (l) { return l.path; }).join(', ') +
    '. Marks: ! at or after the first bad line, ? after the last proven checkpoint, ~ not a whole record.'));
  document.documentElement.dataset.rendered = '1';
})();
