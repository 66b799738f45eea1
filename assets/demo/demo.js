// The demo page's flow: a phone or an email address (and the configured gate) → code → token. Talks to the public API
// only, and in dev mode reads the code from the dev inbox as a user would read the SMS.
'use strict';

// Every error code of the API (vcode_wire::ErrorCode) as a sentence for people; a Rust test
// checks that no code is missing.
const SENTENCES = {
  40000: 'The request was not understood. Check what you typed and try again.',
  40001: 'That does not look like a phone number that can receive SMS.',
  40002: 'A code is made of digits only.',
  40003: 'This kind of code is not offered.',
  40004: 'Codes are sent to mobile numbers only. Please use your mobile number.',
  40005: 'Codes are not sent to numbers of this country.',
  40006: 'Please ask for a code first.',
  40007: 'This code was sent to another number. Please ask for a new one.',
  40008: 'Please enter a valid email address, such as name@example.com.',
  40010: 'That code is not the one we sent.',
  40020: 'The characters do not match the picture. Here is a new one.',
  40021: 'The "I am not a robot" check did not pass. Please try it again.',
  40100: 'This page is not allowed to call the service.',
  40300: 'Codes cannot be sent to numbers like this one for now. Please try again later.',
  40400: 'That was not found.',
  40401: 'This code request is no longer known. Please ask for a new code.',
  40500: 'The service does not accept that kind of request here.',
  40800: 'Your request took too long to arrive. Please try again.',
  40900: 'The same request is already being handled. Wait a moment.',
  41000: 'That code has expired or was already used. Ask for a new one.',
  41300: 'What you sent is too long.',
  42200: 'This request repeats an earlier one with different details.',
  42900: 'A code was sent a moment ago. You can ask for another one soon.',
  42901: 'Too many wrong tries: that code no longer works. Ask for a new one.',
  42902: 'Too many requests for now. Please wait before trying again.',
  50000: 'Something went wrong on our side. Please try again.',
  50200: 'The SMS could not be sent. Please try again in a moment.',
  50201: 'The email could not be sent. Please try again in a moment.',
  50300: 'The service is busy or unreachable. Please try again in a moment.',
};

const page = document.body.dataset;
const $ = (id) => document.getElementById(id);
// verificationId: what the send answered; the verify carries it, so only this page's own
// request can spend the code it sent. channel: 'phone' or 'email', the API's field for
// `destination`.
const state = { channel: 'phone', destination: '', captchaId: null, altcha: null, verificationId: null };

// The SMS or email choice: only the chosen field is shown, required and sent.
function chooseChannel() {
  const email = $('channel-email').checked;
  state.channel = email ? 'email' : 'phone';
  $('phone-field').hidden = email;
  $('phone').disabled = email;
  $('email-field').hidden = !email;
  $('email').disabled = !email;
}

function showError(envelope) {
  const box = $('error');
  if (!envelope) {
    box.hidden = true;
    return;
  }
  let sentence = SENTENCES[envelope.code] || envelope.message || 'Something went wrong.';
  const data = envelope.data || {};
  if (data.remaining_attempts !== undefined) {
    sentence += ` ${data.remaining_attempts} ${data.remaining_attempts === 1 ? 'try' : 'tries'} left.`;
  }
  if (data.retry_after !== undefined) {
    sentence += ` Wait ${data.retry_after} s.`;
  }
  box.textContent = sentence;
  box.dataset.code = envelope.code;
  box.hidden = false;
}

async function call(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  try {
    const response = await fetch(path, init);
    return await response.json();
  } catch (error) {
    return { code: 50300, message: String(error), data: null };
  }
}

function show(step) {
  for (const id of ['step-phone', 'step-code', 'step-done']) {
    $(id).hidden = id !== step;
  }
  // The authenticator app is the other way in, offered beside the first step.
  $('step-totp').hidden = step !== 'step-phone';
}

async function newCaptcha() {
  const answer = await call('POST', '/api/v1/captcha');
  if (answer.code !== 200) {
    showError(answer);
    return;
  }
  state.captchaId = answer.data.captcha_id;
  $('captcha-image').src = answer.data.image_url;
  $('captcha-image').dataset.captchaId = state.captchaId;
  $('captcha-answer').value = '';
}

async function send(event) {
  event.preventDefault();
  showError(null);
  state.destination = $(state.channel).value.trim();
  const body = { [state.channel]: state.destination };
  if (page.captcha === 'true') {
    body.captcha_id = state.captchaId;
    body.captcha_answer = $('captcha-answer').value.trim();
  }
  if (page.pow === 'true') {
    const hidden = document.querySelector('input[name="altcha"]');
    body.altcha = state.altcha || (hidden && hidden.value) || undefined;
  }
  $('send').disabled = true;
  const answer = await call('POST', '/api/v1/otp/send', body);
  $('send').disabled = false;
  if (answer.code !== 200) {
    showError(answer);
    // A captcha or proof of work is single use: whatever the outcome, get a fresh one.
    if (page.captcha === 'true') newCaptcha();
    if (page.pow === 'true') resetAltcha();
    return;
  }
  state.verificationId = answer.data.verification_id;
  const minutes = Math.round(answer.data.expires_in / 60);
  // Unconfirmed: the provider never answered, but the message may still arrive and its code works.
  const message = state.channel === 'email' ? 'email' : 'SMS';
  $('sent-to').textContent = answer.data.delivery === 'unconfirmed'
    ? `We asked for a code to be sent to ${state.destination}; the ${message} provider has not confirmed it yet. If it arrives, it is valid for ${minutes} minutes; otherwise send again in ${answer.data.resend_after} seconds.`
    : `We sent a code to ${state.destination}. It is valid for ${minutes} minutes.`;
  $('outbox-kind').textContent = state.channel === 'email' ? 'email' : 'SMS';
  $('code').value = '';
  show('step-code');
  $('code').focus();
  if (page.dev === 'true') readOutbox();
}

async function readOutbox() {
  const answer = await call('GET', `/api/v1/dev/inbox?${state.channel}=${encodeURIComponent(state.destination)}`);
  if (answer.code === 200 && answer.data.messages.length) {
    $('outbox-code').textContent = answer.data.messages[answer.data.messages.length - 1].code;
    $('outbox').hidden = false;
  }
}

/// The JWT's parts decoded (base64url JSON); the signature is the backend's to check.
function decodeJwt(token) {
  const part = (text) => {
    const base64 = text.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(text.length / 4) * 4, '=');
    const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
    return JSON.parse(new TextDecoder().decode(bytes));
  };
  const [header, payload] = token.split('.');
  return { header: part(header), payload: part(payload) };
}

async function verify(event) {
  event.preventDefault();
  showError(null);
  $('verify').disabled = true;
  // The phone or address too: it must match the id, and a service verifying by phone needs it.
  const answer = await call('POST', '/api/v1/otp/verify', {
    verification_id: state.verificationId,
    [state.channel]: state.destination,
    code: $('code').value.trim(),
  });
  $('verify').disabled = false;
  if (answer.code !== 200) {
    showError(answer);
    return;
  }
  showToken(answer);
}

// The authenticator app: this page's own user (a random identity), enrolled through the
// demo's routes (a real page's backend calls /api/v1/totp with its API key), confirmed by a
// first code, then a code checked for the token.
const totp = { identity: `demo-${Math.random().toString(36).slice(2, 10)}`, factorId: null, confirmed: false };

async function enrolTotp() {
  showError(null);
  $('totp-enrol').disabled = true;
  const answer = await call('POST', `/demo/totp/${totp.identity}/factors`, { issuer: 'vcode demo', friendly_name: totp.identity });
  $('totp-enrol').disabled = false;
  if (answer.code !== 200) {
    showError(answer);
    return;
  }
  totp.factorId = answer.data.factor.factor_id;
  totp.confirmed = false;
  $('totp-qr').src = `data:image/png;base64,${answer.data.qr_png}`;
  $('totp-secret').textContent = answer.data.secret.replace(/(.{4})/g, '$1 ').trim();
  $('totp-note').textContent = 'Then type the code the app shows, to confirm it.';
  $('totp-submit').textContent = 'Confirm';
  $('totp-code').value = '';
  $('totp-enrol').hidden = true;
  $('totp-setup').hidden = false;
  $('totp-code').focus();
}

async function submitTotp(event) {
  event.preventDefault();
  showError(null);
  const code = $('totp-code').value.trim();
  $('totp-submit').disabled = true;
  const answer = totp.confirmed
    ? await call('POST', `/demo/totp/${totp.identity}/verify`, { factor_id: totp.factorId, code })
    : await call('POST', `/demo/totp/${totp.identity}/factors/${totp.factorId}/confirm`, { code });
  $('totp-submit').disabled = false;
  if (answer.code !== 200) {
    showError(answer);
    return;
  }
  if (!totp.confirmed) {
    totp.confirmed = true;
    $('totp-note').textContent = 'Confirmed. Now sign in: type the next code the app shows (each code works once).';
    $('totp-submit').textContent = 'Sign in';
    $('totp-code').value = '';
    $('totp-code').focus();
    return;
  }
  showToken(answer);
}

function showToken(answer) {
  const token = answer.data.token;
  if (token) {
    const { header, payload } = decodeJwt(token);
    $('token').textContent = token;
    const times = ['iat', 'exp'].filter((claim) => claim in payload)
      .map((claim) => `${claim}: ${new Date(payload[claim] * 1000).toISOString()}`);
    $('claims').textContent = `${JSON.stringify(payload, null, 2)}\n\nheader: ${JSON.stringify(header)}\n${times.join('\n')}`;
  } else {
    $('token').textContent = '(this server issues no token)';
    $('claims').textContent = JSON.stringify(answer.data, null, 2);
  }
  show('step-done');
}

function resetAltcha() {
  state.altcha = null;
  const widget = $('altcha');
  if (widget && typeof widget.reset === 'function') widget.reset();
}

function restart() {
  showError(null);
  $('outbox').hidden = true;
  totp.factorId = null;
  totp.confirmed = false;
  $('totp-enrol').hidden = false;
  $('totp-setup').hidden = true;
  show('step-phone');
  if (page.captcha === 'true') newCaptcha();
  if (page.pow === 'true') resetAltcha();
}

$('step-phone').addEventListener('submit', send);
$('totp-enrol').addEventListener('click', enrolTotp);
$('step-totp').addEventListener('submit', submitTotp);
$('channel-sms').addEventListener('change', chooseChannel);
$('channel-email').addEventListener('change', chooseChannel);
chooseChannel();
$('step-code').addEventListener('submit', verify);
$('captcha-new').addEventListener('click', newCaptcha);
$('back').addEventListener('click', restart);
$('again').addEventListener('click', restart);
if (page.captcha === 'true') {
  $('captcha-gate').hidden = false;
  newCaptcha();
}
if (page.pow === 'true') {
  // Created only here: a widget in a hidden gate would hold the form back.
  const widget = document.createElement('altcha-widget');
  widget.id = 'altcha';
  widget.setAttribute('challenge', '/api/v1/pow/challenge');
  $('pow-gate').append(widget);
  $('pow-gate').hidden = false;
  widget.addEventListener('statechange', (event) => {
    state.altcha = event.detail.state === 'verified' ? event.detail.payload : null;
  });
}
