#pragma once

#include <QDialog>
#include <QMap>

class QCheckBox;
class QSpinBox;

namespace once::ui {

// Alert thresholds, desktop notifications and the partner's idempotency window.
class SettingsDialog final : public QDialog
{
    Q_OBJECT

public:
    explicit SettingsDialog(QWidget *parent = nullptr);

    void accept() override;

private:
    QSpinBox *m_oldestAge = nullptr;
    QSpinBox *m_partnerFailingSends = nullptr;
    QSpinBox *m_partnerDown = nullptr;
    QCheckBox *m_showInTray = nullptr;
    QMap<QString, QCheckBox *> m_notifies; // by TrayNotifier::settingsName()
    QSpinBox *m_idempotencyWindow = nullptr;
    QSpinBox *m_redriveRate = nullptr;
};

} // namespace once::ui
