#pragma once

#include <QString>

class QAction;
class QWidget;

namespace once::ui {

// The controls that write to the store (redrive, discard, resolve, starting the worker).
// While the store is open read-only they are disabled and their tooltip says why; once it
// is writable again they follow their own rule and get their own tooltip back.
// readOnlyReason: StoreSession::readOnlyReason(), empty while the store is writable.
void enableUnlessReadOnly(QAction *action, bool enabled, const QString &readOnlyReason);
void enableUnlessReadOnly(QWidget *widget, bool enabled, const QString &readOnlyReason);

// "Read-only: you may not write the file …": what a disabled control says.
QString readOnlyToolTip(const QString &readOnlyReason);

} // namespace once::ui
