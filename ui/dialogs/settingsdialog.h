#pragma once

#include "alerting/alertrules.h"

#include <QDialog>
#include <QMap>

class QCheckBox;
class QSpinBox;

namespace once::ui {

class StoreSession;

// The store's alert thresholds (shared by every console and watcher on it, so changed
// through the session and audited), and this console's own: desktop notifications, the
// partner's idempotency window, the redrive rate.
class SettingsDialog final : public QDialog
{
    Q_OBJECT

public:
    // Without a session (no store open) the alert thresholds are shown but cannot change.
    explicit SettingsDialog(StoreSession *session = nullptr, const once::AlertThresholds &thresholds = {},
                            QWidget *parent = nullptr);

    void accept() override;

private:
    StoreSession *m_session = nullptr;
    once::AlertThresholds m_thresholds;
    QMap<once::AlertRule, QSpinBox *> m_alertValues; // seconds for durations, else the count
    QCheckBox *m_showInTray = nullptr;
    QMap<QString, QCheckBox *> m_notifies; // by TrayNotifier::settingsName()
    QSpinBox *m_idempotencyWindow = nullptr;
    QSpinBox *m_redriveRate = nullptr;
};

} // namespace once::ui
