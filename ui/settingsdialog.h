#pragma once

#include <QDialog>

class QSpinBox;

namespace once::ui {

// Alert thresholds and the partner's idempotency window.
class SettingsDialog final : public QDialog
{
    Q_OBJECT

public:
    explicit SettingsDialog(QWidget *parent = nullptr);

    void accept() override;

private:
    QSpinBox *m_oldestAge = nullptr;
    QSpinBox *m_partnerFailingSends = nullptr;
    QSpinBox *m_idempotencyWindow = nullptr;
    QSpinBox *m_redriveRate = nullptr;
};

} // namespace once::ui
