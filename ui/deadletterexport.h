#pragma once

#include "operator/inspector.h"

#include <QByteArray>
#include <QString>

namespace once::ui {

// The dead letters as a file for a spreadsheet or a ticket: JSON (as `once dlq --json`
// words them) or CSV (one line each, the same fields, formula-safe). Payloads stay out:
// they may be large, and they hold what the users wrote.
QByteArray deadLettersToJson(const QList<once::DeadLetter> &letters);
QByteArray deadLettersToCsv(const QList<once::DeadLetter> &letters);
// CSV for a .csv name, JSON otherwise; the whole file or nothing.
bool writeDeadLetters(const QString &path, const QList<once::DeadLetter> &letters, QString *error);

} // namespace once::ui
