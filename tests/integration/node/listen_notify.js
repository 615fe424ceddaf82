// node-postgres' LISTEN/NOTIFY API against whatever PGHOST/PGPORT/PGUSER/PGDATABASE name (a direct
// PostgreSQL or pgtether): test_listen.cpp runs it against both. Exits 0 and prints OK when every
// check holds; otherwise prints the first failed check and exits 1.
'use strict';
const { Client } = require('pg');

function check(condition, what) {
  if (!condition) throw new Error('check failed: ' + what);
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
async function until(predicate, what, ms = 5000) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error('timed out: ' + what);
    await sleep(20);
  }
}

async function main() {
  const listener = new Client();
  const other = new Client();
  await listener.connect();
  await other.connect();
  const got = [];
  listener.on('notification', (msg) => got.push(msg));

  const listened = await listener.query('LISTEN boom');
  check(listened.command === 'LISTEN', 'LISTEN answers LISTEN, got ' + listened.command);
  await listener.query('LISTEN "Quoted Channel"');
  await other.query("NOTIFY boom, 'omg!'");
  await other.query("SELECT pg_notify('boom', $1)", ['with a parameter']);
  await other.query('NOTIFY "Quoted Channel", \'quoted\'');
  await until(() => got.length >= 3, 'three notifications');
  check(got[0].channel === 'boom' && got[0].payload === 'omg!', 'first: ' + JSON.stringify(got[0]));
  check(got[1].payload === 'with a parameter', 'second: ' + JSON.stringify(got[1]));
  check(got[2].channel === 'Quoted Channel' && got[2].payload === 'quoted', 'third');
  check(got.every((m) => m.processId > 0), 'a sender pid on every notification');

  // Inside a transaction nothing arrives; at COMMIT everything does.
  await listener.query('BEGIN');
  await listener.query('SELECT 1');
  await other.query("NOTIFY boom, 'in a transaction'");
  await sleep(300);
  check(got.length === 3, 'nothing inside the transaction, got ' + got.length);
  await listener.query('COMMIT');
  await until(() => got.length === 4, 'the held notification after COMMIT');
  check(got[3].payload === 'in a transaction', 'fourth');

  const unlistened = await listener.query('UNLISTEN *');
  check(unlistened.command === 'UNLISTEN', 'UNLISTEN * answers UNLISTEN');
  await other.query("NOTIFY boom, 'too late'");
  await sleep(300);
  check(got.length === 4, 'nothing after UNLISTEN *, got ' + got.length);
  await listener.end();
  await other.end();
  console.log('OK');
}

main().catch((error) => {
  console.log(error.message);
  process.exit(1);
});
