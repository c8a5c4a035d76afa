#include "widgets/readonlycontrols.h"

#include <QAction>
#include <QCoreApplication>
#include <QVariant>
#include <QWidget>

namespace once::ui {

namespace {

// Where a control's own tooltip waits while the read-only one stands in for it.
constexpr const char *WritableToolTip = "onceWritableToolTip";

template <typename Control> void apply(Control *control, bool enabled, const QString &readOnlyReason)
{
    if (!control->property(WritableToolTip).isValid())
        control->setProperty(WritableToolTip, control->toolTip());
    const bool readOnly = !readOnlyReason.isEmpty();
    control->setEnabled(enabled && !readOnly);
    control->setToolTip(readOnly ? readOnlyToolTip(readOnlyReason)
                                 : control->property(WritableToolTip).toString());
}

} // namespace

void enableUnlessReadOnly(QAction *action, bool enabled, const QString &readOnlyReason)
{
    apply(action, enabled, readOnlyReason);
}

void enableUnlessReadOnly(QWidget *widget, bool enabled, const QString &readOnlyReason)
{
    apply(widget, enabled, readOnlyReason);
}

QString readOnlyToolTip(const QString &readOnlyReason)
{
    return QCoreApplication::translate("once::ui::ReadOnly",
                                       "Read-only: %1. Nothing in this window can change the store.")
        .arg(readOnlyReason);
}

} // namespace once::ui
