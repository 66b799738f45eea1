// The operator console: fetches the operator routes' JSON and draws it (uPlot for the charts).
// The page itself holds nothing secret; with VCODE_ADMIN_TOKEN set, every data route answers
// 401 without it, so the console asks for the token once, keeps it in this tab's
// sessionStorage (gone when the tab closes, never in a URL) and sends it as a bearer header.
// Everything the routes say is written as text (textContent), never as HTML.
'use strict';

const TOKEN_KEY = 'vcode-console-token';
const REFRESH_MS = 15000;
// Conversion over time is verified ÷ sent over this trailing window: a code sent in one minute
// is verified in the next, so one bucket alone says little.
const CONVERSION_WINDOW_SECS = 600;
const CONVERSION_MIN_SENDS = 3;
const TOP_COUNTRIES = 4;
const ROUTES = {
  traffic: (minutes) => `/api/v1/admin/fraud/traffic?minutes=${minutes}`,
  suspensions: '/api/v1/admin/fraud/suspensions',
  lift: (prefix) => `/api/v1/admin/fraud/suspensions/${encodeURIComponent(prefix)}/lift`,
  safeList: '/api/v1/admin/fraud/safe-list',
  safeEntry: (entry, tenant) => `/api/v1/admin/fraud/safe-list/${encodeURIComponent(entry)}${
    tenant ? `?tenant=${encodeURIComponent(tenant)}` : ''}`,
  prices: '/api/v1/admin/sms-prices',
  delivery: (hours) => `/api/v1/admin/delivery-rates?hours=${hours}`,
  stats: '/api/v1/stats?days=7',
  metrics: '/metrics',
};
const COLORS = {
  sends: '#2563eb', verified: '#16a34a', refused: '#dc2626', baseline: '#6b7280',
  countries: ['#7c3aed', '#0891b2', '#d97706', '#db2777'],
};
const QUOTAS = [
  ['quota_phone', 'per phone'],
  ['quota_ip', 'per client address'],
  ['quota_global', 'global'],
  ['quota_failures', 'failed verifies'],
];

const $ = (id) => document.getElementById(id);
const regionNames = (() => {
  try { return new Intl.DisplayNames(['en'], { type: 'region' }); } catch { return null; }
})();
const countryName = (code) => {
  if (!code || code === '*') return 'other countries';
  // The guard's region of the non-geographic calling codes (+800, +881…): UN M.49's "world".
  if (code === '001') return 'non-geographic';
  try { return regionNames?.of(code) ?? code; } catch { return code; }
};
const count = (n) => (n == null ? '—' : Number(n).toLocaleString('en-US'));
// One decimal below 10 % (where a tenth matters), none at 0 or above.
const percent = (share) => (share == null ? '—' : `${(share * 100).toFixed(share > 0 && share < 0.1 ? 1 : 0)} %`);

class NeedToken extends Error {}

/// One operator route: its status and JSON body (null when the answer is not JSON).
async function api(path, init = {}) {
  const headers = new Headers(init.headers || {});
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.set('Authorization', `Bearer ${token}`);
  const response = await fetch(path, { ...init, headers, cache: 'no-store', credentials: 'omit' });
  if (response.status === 401) throw new NeedToken();
  const text = await response.text();
  let body = null;
  try { body = JSON.parse(text); } catch { body = null; }
  return { status: response.status, body, text };
}

/// The `data` of a 200 answer; null for a route this instance does not serve (404), when
/// `optional` (the stats route exists only with an admin token).
async function data(path, { optional = false } = {}) {
  const answer = await api(path);
  if (optional && answer.status === 404) return null;
  if (answer.status !== 200 || !answer.body) {
    const message = answer.body?.message || `HTTP ${answer.status}`;
    throw new Error(`${path}: ${message}`);
  }
  return answer.body.data;
}

// --- Drawing ----------------------------------------------------------------------------------

const charts = {};

function chart(id, options, rows) {
  const element = $(id);
  charts[id]?.destroy();
  element.replaceChildren();
  const width = Math.max(element.clientWidth, 200);
  const height = element.clientHeight || 190;
  charts[id] = new uPlot({ width, height, ...options }, rows, element);
}

function resizeCharts() {
  for (const [id, plot] of Object.entries(charts)) {
    const element = $(id);
    plot.setSize({ width: Math.max(element.clientWidth, 200), height: plot.height });
  }
}

const axes = (yLabel, format) => [
  { stroke: '#4b5563', grid: { stroke: '#eef0f3' }, ticks: { stroke: '#e5e7eb' } },
  { stroke: '#4b5563', grid: { stroke: '#eef0f3' }, ticks: { stroke: '#e5e7eb' }, size: 44, label: yLabel, labelSize: 14, values: format },
];
// A value with no neighbour draws no line: a lone minute (the first of a fresh service, a
// burst) is drawn as a dot instead, so it does not vanish from the chart.
const loneValues = (u, seriesIdx) => {
  const values = u.data[seriesIdx];
  const lone = [];
  for (let i = 0; i < values.length; i += 1) {
    if (values[i] != null && values[i - 1] == null && values[i + 1] == null) lone.push(i);
  }
  return lone.length ? lone : null;
};
const line = (label, color, extra = {}) => ({
  label, stroke: color, width: 2, points: { show: false, filter: loneValues, size: 6, fill: color }, ...extra,
});
const wholeNumbers = (_, ticks) => ticks.map((v) => (Number.isInteger(v) ? count(v) : ''));

function note(id, text) {
  const element = $(id);
  element.textContent = text || '';
  element.hidden = !text;
}

function row(tbody, cells, attributes = {}) {
  const tr = document.createElement('tr');
  for (const [name, value] of Object.entries(attributes)) tr.dataset[name] = value;
  for (const cell of cells) {
    const td = document.createElement('td');
    if (cell instanceof Node) td.append(cell);
    else if (cell && typeof cell === 'object') {
      td.textContent = cell.text;
      if (cell.className) td.className = cell.className;
      if (cell.title) td.title = cell.title;
    } else td.textContent = cell ?? '';
    tr.append(td);
  }
  tbody.append(tr);
  return tr;
}

const num = (text, title) => ({ text, className: 'num', title });
// A number range is shown with its `+`; a mail domain (`@x`), a country and the service (`*`),
// which the guard's levels also refuse (issue 39), as they are.
const prefixCell = (prefix, country) => ({
  text: `${/^[0-9]+$/.test(prefix) ? '+' : ''}${prefix} ${prefix === country ? '' : country ?? ''}`.trim(),
  title: countryName(country),
});
const badge = (text, kind) => {
  const span = document.createElement('span');
  span.className = `state state-${kind}`;
  span.textContent = text;
  return span;
};

function relative(ms) {
  const secs = Math.round((ms - Date.now()) / 1000);
  const abs = Math.abs(secs);
  const amount = abs < 90 ? `${abs} s` : abs < 5400 ? `${Math.round(abs / 60)} min` : `${(abs / 3600).toFixed(1)} h`;
  return secs >= 0 ? `in ${amount}` : `${amount} ago`;
}

// --- The panels -------------------------------------------------------------------------------

/// Sends, verified and refused per bucket, for every country or the one chosen.
// A spend cap reached (VCODE_FRAUD_SPEND_*): its sends are refused until it has room.
function drawSpendAlert(traffic) {
  const reached = (traffic.spend ?? []).filter((cap) => cap.reached);
  note('spend-alert', reached.length
    ? `Spend cap reached, sends refused: ${reached
      .map((cap) => `${cap.scope === '*' ? 'the service' : cap.scope} per ${cap.window} (${cap.spent.toFixed(2)} of ${cap.cap.toFixed(2)})`)
      .join('; ')}`
    : '');
}

function drawTraffic(traffic) {
  drawSpendAlert(traffic);
  const chosen = $('country').value;
  const pick = (entry, field) => (chosen ? entry.by_country?.[chosen]?.[field] ?? 0 : entry[field]);
  const times = traffic.series.map((entry) => entry.t_ms / 1000);
  const series = [{}, line('sent', COLORS.sends, { fill: 'rgba(37, 99, 235, 0.10)' }), line('verified', COLORS.verified)];
  const rows = [times, traffic.series.map((e) => pick(e, 'sends')), traffic.series.map((e) => pick(e, 'verified'))];
  if (!chosen) {
    series.push(line('refused by the guard', COLORS.refused, { dash: [4, 3] }));
    rows.push(traffic.series.map((e) => e.refused));
  }
  note('traffic-note', traffic.level === 'off' ? 'The fraud guard is off (VCODE_FRAUD_GUARD=off): it counts nothing.' : '');
  chart('chart-traffic', {
    series,
    axes: axes(`SMS per ${traffic.bucket_secs} s`, wholeNumbers),
    scales: { x: { time: true }, y: { range: (_, min, max) => [0, Math.max(max, 4)] } },
    legend: { live: false },
  }, rows);
}

/// Trailing-window conversion, in total and for the countries with most sends.
function drawConversion(traffic, countries) {
  const window = Math.max(1, Math.round(CONVERSION_WINDOW_SECS / traffic.bucket_secs));
  const trailing = (sends, verified) => sends.map((_, i) => {
    let sent = 0; let ok = 0;
    for (let j = Math.max(0, i - window + 1); j <= i; j += 1) { sent += sends[j]; ok += verified[j]; }
    return sent >= CONVERSION_MIN_SENDS ? Math.min(100, (100 * ok) / sent) : null;
  });
  const times = traffic.series.map((entry) => entry.t_ms / 1000);
  const rows = [times, trailing(traffic.series.map((e) => e.sends), traffic.series.map((e) => e.verified))];
  const series = [{}, line('all', COLORS.sends, { width: 2.5 })];
  countries.slice(0, TOP_COUNTRIES).forEach((code, i) => {
    const of = (field) => traffic.series.map((e) => e.by_country?.[code]?.[field] ?? 0);
    rows.push(trailing(of('sends'), of('verified')));
    series.push(line(code, COLORS.countries[i], { width: 1.5 }));
  });
  if (traffic.baseline_conversion != null) {
    rows.push(times.map(() => 100 * traffic.baseline_conversion));
    series.push(line('baseline', COLORS.baseline, { dash: [6, 4], width: 1 }));
  }
  chart('chart-conversion', {
    series,
    axes: axes('% verified', (_, ticks) => ticks.map((v) => `${v}`)),
    scales: { x: { time: true }, y: { range: [0, 100] } },
    legend: { live: false },
  }, rows);
  const judged = rows[1].some((v) => v != null);
  note('conversion-note', judged ? '' : `No window yet with ${CONVERSION_MIN_SENDS} or more SMS sent.`);
}

/// The countries of the range, most sends first.
function countriesBySends(traffic) {
  const totals = new Map();
  for (const entry of traffic.series) {
    for (const [code, counts] of Object.entries(entry.by_country || {})) {
      const total = totals.get(code) || { sends: 0, verified: 0 };
      total.sends += counts.sends; total.verified += counts.verified;
      totals.set(code, total);
    }
  }
  return [...totals.entries()].sort((a, b) => b[1].sends - a[1].sends || a[0].localeCompare(b[0]));
}

function fillCountryChoice(countries) {
  const select = $('country');
  const chosen = select.value;
  select.replaceChildren(new Option('all countries', ''));
  for (const [code] of countries) select.append(new Option(`${code} ${countryName(code)}`, code));
  select.value = countries.some(([code]) => code === chosen) ? chosen : '';
}

function drawPrefixes(traffic) {
  const tbody = $('prefixes').tBodies[0];
  tbody.replaceChildren();
  for (const p of traffic.top_prefixes) {
    // Conversion is the guard's: of the sends past the grace period only (null before any).
    const conversion = p.conversion == null
      ? num('—', 'no send past the grace period yet: not judged')
      : num(percent(p.conversion), `${count(p.unconverted)} of the sends past the grace period not verified`);
    row(tbody, [
      prefixCell(p.prefix, p.country), num(count(p.sends)), num(count(p.verified)),
      num(count(p.unconverted)), conversion, badge(p.state, p.state),
    ], { prefix: p.prefix, state: p.state });
  }
  note('prefixes-note', traffic.top_prefixes.length ? '' : 'No SMS sent in the range.');
}

function drawSuspensions(suspensions) {
  const tbody = $('suspensions').tBodies[0];
  tbody.replaceChildren();
  for (const s of suspensions.suspensions) {
    const lift = document.createElement('button');
    lift.type = 'button';
    lift.className = 'lift';
    lift.textContent = 'Lift';
    lift.title = `Lift the suspension of +${s.prefix} now`;
    lift.addEventListener('click', () => liftSuspension(s.prefix, lift));
    const conversion = s.sends ? s.conversions / s.sends : null;
    // A spread verdict (and a surge hold, before 2026-12-06) holds sends into ranges without
    // history while its counts say so; any other refusal is a strike, and a repeat offence is
    // refused for longer: the count says which this is.
    const held = s.reason === 'surge' || s.reason === 'spread';
    const label = badge(!held && s.strikes > 1 ? `${s.reason} ×${s.strikes}` : s.reason, held ? 'held' : 'suspended');
    label.title = s.evidence
      || (held ? 'held back while its counts say so' : `suspended (strike ${s.strikes})`);
    // A level's verdict says which level and the figures that decided it.
    const why = document.createElement('span');
    why.append(label);
    if (s.evidence) {
      const evidence = document.createElement('small');
      evidence.className = 'evidence';
      evidence.textContent = s.evidence;
      why.append(document.createElement('br'), evidence);
      label.title = s.evidence;
    }
    row(tbody, [
      prefixCell(s.prefix, s.country), why, num(count(s.sends)),
      num(percent(conversion), `${count(s.conversions)} verified`),
      { text: relative(s.until_ms), title: `since ${new Date(s.since_ms).toLocaleString()}` },
      // A spread record is the counts' verdict, taken again on every send: nothing to lift.
      s.reason === 'spread' ? { text: '' } : lift,
    ], { prefix: s.prefix, reason: s.reason });
  }
  const n = suspensions.suspensions.length;
  $('suspensions-count').textContent = n ? `${n} now` : '';
  note('suspensions-note', n ? '' : 'None: every prefix is served.');
  $('tile-suspended').textContent = count(n);
  $('tile-suspended').classList.toggle('alarm', n > 0);
}

async function liftSuspension(prefix, button) {
  button.disabled = true;
  try {
    const answer = await api(ROUTES.lift(prefix), { method: 'POST' });
    if (answer.status !== 200) {
      showError(`Lifting +${prefix}: ${answer.body?.message || `HTTP ${answer.status}`}`);
    }
  } catch (error) {
    if (error instanceof NeedToken) { askForToken(true); return; }
    showError(`Lifting +${prefix}: ${error.message}`);
  }
  await load();
}

/// The fraud guard's safe list: the configured entries (read-only), the operators' and each
/// tenant's, each but the configured with a Remove button.
function drawSafeList(list) {
  const tbody = $('safe-list').tBodies[0];
  tbody.replaceChildren();
  for (const e of list.entries) {
    let action = { text: 'configured', className: 'muted', title: 'VCODE_FRAUD_SAFE_LIST: change the setting to remove it' };
    if (e.source !== 'configured') {
      action = document.createElement('button');
      action.type = 'button';
      action.className = 'unlist';
      action.textContent = 'Remove';
      action.title = `Remove ${e.entry} from the safe list`;
      action.addEventListener('click', () => removeSafeEntry(e, action));
    }
    const added = e.added_at_ms == null
      ? { text: '—', title: 'read at start' }
      : { text: `${e.added_by}, ${relative(e.added_at_ms)}`, title: new Date(e.added_at_ms).toLocaleString() };
    row(tbody, [
      e.entry,
      e.tenant ? { text: e.tenant, title: "this tenant's sends only" } : { text: 'every send' },
      added,
      action,
    ], { entry: e.entry, source: e.source });
  }
  $('safe-list-scope').textContent = `other instances within ${list.refresh_secs} s`;
  note('safe-list-note', list.entries.length ? '' : 'Empty: every destination is judged.');
}

function safeError(text) {
  const element = $('safe-error');
  element.textContent = text || '';
  element.hidden = !text;
}

async function addSafeEntry(event) {
  event.preventDefault();
  const entry = $('safe-entry').value.trim();
  const by = $('safe-by').value.trim();
  if (!entry) return;
  const button = event.submitter || $('safe-add').querySelector('button');
  button.disabled = true;
  try {
    const answer = await api(ROUTES.safeList, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(by ? { entry, added_by: by } : { entry }),
    });
    if (answer.status === 200) {
      $('safe-entry').value = '';
      safeError('');
    } else {
      safeError(`Adding ${entry}: ${answer.body?.message || `HTTP ${answer.status}`}`);
    }
  } catch (error) {
    if (error instanceof NeedToken) { askForToken(true); return; }
    safeError(`Adding ${entry}: ${error.message}`);
  } finally {
    button.disabled = false;
  }
  await load();
}

async function removeSafeEntry(e, button) {
  button.disabled = true;
  try {
    const answer = await api(ROUTES.safeEntry(e.entry, e.tenant), { method: 'DELETE' });
    if (answer.status === 200) safeError('');
    else safeError(`Removing ${e.entry}: ${answer.body?.message || `HTTP ${answer.status}`}`);
  } catch (error) {
    if (error instanceof NeedToken) { askForToken(true); return; }
    safeError(`Removing ${e.entry}: ${error.message}`);
  }
  await load();
}

/// Quota refusals by day from the stats route; without it (no admin token configured, so no
/// stats route), this instance's counters since it started, from /metrics.
async function drawRefusals() {
  const stats = await data(ROUTES.stats, { optional: true });
  const tbody = $('refusals').tBodies[0];
  tbody.replaceChildren();
  const chartElement = $('chart-refusals');
  if (stats) {
    const days = [...stats.days].reverse();
    const times = days.map((day) => Date.parse(`${day.date}T00:00:00Z`) / 1000);
    const perDay = days.map((day) => QUOTAS.reduce((sum, [key]) => sum + (day.counters[key] || 0), 0));
    chartElement.hidden = false;
    chart('chart-refusals', {
      series: [{}, {
        label: 'refused', stroke: COLORS.refused, fill: 'rgba(220, 38, 38, 0.55)', width: 1,
        paths: uPlot.paths.bars({ size: [0.6, 40] }), points: { show: false },
      }],
      axes: [
        { stroke: '#4b5563', grid: { show: false }, size: 28, values: (_, ticks) => ticks.map((t) => new Date(t * 1000).toISOString().slice(5, 10)) },
        { stroke: '#4b5563', grid: { stroke: '#eef0f3' }, size: 44, splits: (u) => [0, u.scales.y.max / 2, u.scales.y.max], values: wholeNumbers },
      ],
      scales: { x: { time: false, range: (_, min, max) => [min - 43200, max + 43200] }, y: { range: (_, min, max) => [0, 2 * Math.ceil(Math.max(max, 4) / 2)] } },
      legend: { show: false },
    }, [times, perDay]);
    const today = stats.days[0]?.counters || {};
    for (const [key, label] of QUOTAS) {
      row(tbody, [label, num(count(today[key] || 0)), num(count(stats.totals[key] || 0))], { quota: key });
    }
    $('refusals-total-head').textContent = '7 days';
    $('refusals-scope').textContent = 'per UTC day';
    note('refusals-note', '');
    return;
  }
  chartElement.hidden = true;
  const metrics = await api(ROUTES.metrics);
  const since = {};
  for (const match of metrics.text.matchAll(/^vcode_quota_rejections_total\{quota="([a-z_]+)"\} (\d+)/gm)) {
    since[match[1]] = Number(match[2]);
  }
  const byMetric = { quota_phone: 'phone', quota_ip: 'client_ip', quota_global: 'global', quota_failures: 'destination_failures' };
  for (const [key, label] of QUOTAS) {
    row(tbody, [label, num('—'), num(count(since[byMetric[key]] || 0))], { quota: key });
  }
  $('refusals-total-head').textContent = 'since start';
  $('refusals-scope').textContent = 'this instance';
  note('refusals-note', 'Daily counters of every instance need VCODE_ADMIN_TOKEN (the stats route exists only with it).');
}

/// SMS per country over the range × the price table.
function drawSpend(countries, prices, minutes) {
  const tbody = $('spend').tBodies[0];
  tbody.replaceChildren();
  const table = prices?.prices || {};
  const priced = Object.keys(table).length > 0;
  const money = (amount, digits) => (amount == null ? '—' : new Intl.NumberFormat('en-US', {
    style: 'currency', currency: prices.currency, minimumFractionDigits: digits, maximumFractionDigits: digits,
  }).format(amount));
  let total = 0; let sms = 0; let unpriced = 0;
  for (const [code, counts] of countries) {
    const price = table[code] ?? table['*'];
    const spend = price == null ? null : price * counts.sends;
    sms += counts.sends;
    if (spend == null) unpriced += counts.sends; else total += spend;
    row(tbody, [
      { text: `${code} ${countryName(code)}`, title: table[code] == null && price != null ? 'priced as * (others)' : '' },
      num(count(counts.sends)), num(money(price, 3)), num(money(spend, 2)),
    ], { country: code });
  }
  $('spend-sms').textContent = count(sms);
  $('spend-total').textContent = priced ? money(total, 2) : '—';
  $('spend-scope').textContent = `last ${label(minutes)}${priced ? `, ${prices.currency}` : ''}`;
  $('tile-spend').textContent = priced ? money(total, 2) : '—';
  $('tile-currency').textContent = priced ? `last ${label(minutes)}` : 'no price table';
  if (!priced) note('spend-note', 'No price table: set VCODE_SMS_PRICES (CN=0.045,GB=0.040,*=0.050) and VCODE_SMS_PRICE_CURRENCY.');
  else if (unpriced) note('spend-note', `${count(unpriced)} SMS to countries without a price (no * entry) are not counted.`);
  else note('spend-note', countries.length ? '' : 'No SMS sent in the range.');
}

/// The providers' receipts per provider and country (counted in the store by every instance),
/// over the whole hours that cover the range.
function drawDelivery(rates, hours) {
  const tbody = $('delivery').tBodies[0];
  tbody.replaceChildren();
  for (const rate of rates.rates) {
    row(tbody, [
      rate.provider,
      { text: `${rate.country} ${countryName(rate.country)}`.trim() },
      num(count(rate.delivered)), num(count(rate.undelivered)), num(percent(rate.rate)),
    ], { provider: rate.provider, country: rate.country });
  }
  $('delivery-scope').textContent = `last ${hours} h, from the receipts`;
  note('delivery-note', rates.rates.length ? '' : 'No delivery receipt in the range (receipts need VCODE_SMS_RECEIPTS_URL and the provider set up to send them).');
}

const label = (minutes) => $('range').selectedOptions[0]?.textContent || `${minutes} minutes`;

function drawTiles(traffic) {
  const sum = (field) => traffic.series.reduce((total, e) => total + e[field], 0);
  const sends = sum('sends'); const verified = sum('verified'); const refused = sum('refused');
  $('tile-sends').textContent = count(sends);
  $('tile-verified').textContent = count(verified);
  $('tile-conversion').textContent = sends ? percent(verified / sends) : '—';
  $('tile-baseline').textContent = traffic.baseline_conversion == null ? '' : `baseline ${percent(traffic.baseline_conversion)}`;
  $('tile-refused').textContent = count(refused);
  $('tile-refused').classList.toggle('alarm', refused > 0);
}

function drawLevel(level) {
  const element = $('level');
  element.hidden = !level;
  element.textContent = level ? `fraud guard: ${level}` : '';
  element.className = `badge level-${level || 'none'}`;
}

// --- Loading ----------------------------------------------------------------------------------

let loading = null;
let loads = 0;

async function load() {
  if (loading) return loading;
  loading = (async () => {
    try {
      const minutes = Number($('range').value);
      const hours = Math.min(168, Math.max(1, Math.ceil(minutes / 60)));
      const [traffic, suspensions, prices, delivery, safeList] = await Promise.all([
        data(ROUTES.traffic(minutes)), data(ROUTES.suspensions), data(ROUTES.prices),
        data(ROUTES.delivery(hours)), data(ROUTES.safeList),
      ]);
      showConsole();
      const countries = countriesBySends(traffic);
      fillCountryChoice(countries);
      drawTiles(traffic);
      drawTraffic(traffic);
      drawConversion(traffic, countries.map(([code]) => code));
      drawPrefixes(traffic);
      drawSuspensions(suspensions);
      drawSafeList(safeList);
      drawLevel(traffic.level);
      drawSpend(countries, prices, minutes);
      drawDelivery(delivery, hours);
      await drawRefusals();
      hideError();
      $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
      loads += 1;
      document.body.dataset.loads = String(loads);
    } catch (error) {
      if (error instanceof NeedToken) askForToken(sessionStorage.getItem(TOKEN_KEY) != null);
      else showError(error instanceof TypeError ? 'The operator listener does not answer.' : error.message);
    } finally {
      loading = null;
    }
  })();
  return loading;
}

function showConsole() {
  $('login').hidden = true;
  $('console').hidden = false;
  $('forget').hidden = sessionStorage.getItem(TOKEN_KEY) == null;
}

function askForToken(refused) {
  sessionStorage.removeItem(TOKEN_KEY);
  $('console').hidden = true;
  $('forget').hidden = true;
  $('login').hidden = false;
  const error = $('login-error');
  error.textContent = refused ? 'That token was refused.' : '';
  error.hidden = !refused;
  $('token').focus();
}

function showError(message) {
  $('error').textContent = message;
  $('error').hidden = false;
}

function hideError() {
  $('error').hidden = true;
}

$('login').addEventListener('submit', (event) => {
  event.preventDefault();
  const token = $('token').value.trim();
  $('token').value = '';
  if (!token) return;
  sessionStorage.setItem(TOKEN_KEY, token);
  load();
});
$('forget').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  askForToken(false);
});
$('refresh').addEventListener('click', () => load());
$('safe-add').addEventListener('submit', addSafeEntry);
$('range').addEventListener('change', () => load());
$('country').addEventListener('change', () => load());
let resizing = null;
window.addEventListener('resize', () => {
  clearTimeout(resizing);
  resizing = setTimeout(resizeCharts, 100);
});
setInterval(() => { if (!document.hidden && !$('console').hidden) load(); }, REFRESH_MS);
load();
